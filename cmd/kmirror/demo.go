package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/cmd/kmirror/internal/cli"
	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/metrics"
	"github.com/kmirror/kmirror/core/mirror"
	"github.com/kmirror/kmirror/core/verify"
)

// demoTopics are the topics the demo creates on its source cluster.
var demoTopics = map[string]int32{"orders": 4, "payments": 2}

// cmdDemo runs an embedded demonstration: two in-process Kafka clusters
// (franz-go's kfake), a producer writing plain and transactional traffic
// (with an aborted transaction), a mirror between them with the file state
// store in a temporary directory, live progress, and a verification of both
// logs offset by offset.
func newDemo() *cobra.Command {
	var records int
	var verbose bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run an embedded demo: two in-process clusters, a mirror, and a verification",
		Long: `The embedded demo: two in-process Kafka clusters (franz-go kfake), plain and
transactional traffic with aborted transactions, a mirror with the file state
store in a temporary directory, live progress, and an offset-by-offset
verification of every partition; exits 1 if any partition differs.`,
		Example: cli.Examples(
			"kmirror demo",
			"kmirror demo --records 100000 --verbose"),
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return cli.Fail(runDemo(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), records, verbose, timeout))
		},
	}
	cmd.Flags().IntVar(&records, "records", 20000, "plain records to produce (transactions come on top)")
	cmd.Flags().BoolVar(&verbose, "verbose", false, "show the engine's log")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "give up when mirroring has not caught up by then")
	return cmd
}

func runDemo(ctx context.Context, stdout, stderr io.Writer, records int, verbose bool, timeout time.Duration) error {
	say := func(format string, args ...any) { fmt.Fprintf(stdout, format+"\n", args...) }
	say("kmirror demo: two in-process Kafka clusters (kfake), one mirror, offsets preserved")
	src, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		return fmt.Errorf("starting the source cluster: %w", err)
	}
	defer src.Close()
	dst, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		return fmt.Errorf("starting the destination cluster: %w", err)
	}
	defer dst.Close()
	say("  source      %s", strings.Join(src.ListenAddrs(), ","))
	say("  destination %s", strings.Join(dst.ListenAddrs(), ","))

	srcCl, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...))
	if err != nil {
		return err
	}
	defer srcCl.Close()
	for t, n := range demoTopics {
		if _, err := kadm.NewClient(srcCl).CreateTopic(ctx, n, 1, nil, t); err != nil {
			return fmt.Errorf("creating topic %s: %w", t, err)
		}
	}

	dir, err := os.MkdirTemp("", "kmirror-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfgText := fmt.Sprintf(`
log.level: warn
http.address: ""
mirror.metadata.refresh.interval.ms: 1000
destination:
  bootstrap.servers: %s
state:
  dir: %s
mirrors:
  - name: demo
    bootstrap.servers: %s
    mirror.topics.include: ".*"
`, strings.Join(dst.ListenAddrs(), ","), dir+"/state", strings.Join(src.ListenAddrs(), ","))
	cfg, err := config.Parse([]byte(cfgText), "yaml", nil, nil)
	if err != nil {
		return fmt.Errorf("demo configuration: %w", err)
	}
	mp, err := metrics.New()
	if err != nil {
		return err
	}
	logOut := io.Discard
	if verbose {
		logOut = stderr
	}
	logger := hclog.New(&hclog.LoggerOptions{Name: "kmirror", Output: logOut, Level: hclog.Info})
	// The demo runs its state store as the daemon does: the built-in file
	// store, as a plugin of this binary.
	plugins, err := startPlugins(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer plugins.Close()
	store, err := plugins.store(cfg)
	if err != nil {
		return err
	}
	engine, err := mirror.New(mirror.Options{Store: store, Logger: logger, Metrics: mp,
		Credentials: plugins.credentials, Filters: plugins.host.Filter})
	if err != nil {
		return err
	}
	if err := engine.Start(ctx, cfg); err != nil {
		return err
	}
	stopped := false
	stopEngine := func() {
		if !stopped {
			stopped = true
			sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_ = engine.Stop(sctx)
		}
	}
	defer stopEngine()
	say("  mirror      demo: topics %s, state store %s", "orders (4 partitions), payments (2)", cfg.State.Dir)

	// Produce while the mirror runs.
	produced := make(chan error, 1)
	go func() { produced <- produceDemoTraffic(ctx, src.ListenAddrs(), records) }()

	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(300 * time.Millisecond)
	defer tick.Stop()
	producing := true
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-produced:
			if err != nil {
				return fmt.Errorf("producing demo traffic: %w", err)
			}
			producing = false
			say("  producer    done")
		case <-tick.C:
		}
		mirrored, lag, states := progress(engine.Status())
		say("  progress    %8d offsets mirrored, lag %6d, partitions %s", mirrored, lag, states)
		if !producing && lag == 0 && caughtUp(ctx, srcCl, engine.Status()) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("mirroring did not catch up within %s", timeout)
		}
	}
	stopEngine()

	dstCl, err := kgo.NewClient(kgo.SeedBrokers(dst.ListenAddrs()...))
	if err != nil {
		return err
	}
	defer dstCl.Close()
	say("\nverification (every offset of every partition, source vs destination):")
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tOFFSETS\tRECORDS\tMARKERS\tABORTED\tRESULT")
	bad := 0
	for _, t := range []string{"orders", "payments"} {
		for p := int32(0); p < demoTopics[t]; p++ {
			log, diff, err := verify.Partition(ctx, srcCl, dstCl, t, p)
			if err != nil {
				return fmt.Errorf("verifying %s[%d]: %w", t, p, err)
			}
			var recs, markers, aborted int
			for _, e := range log.Entries {
				switch {
				case e.Control:
					markers++
				case !e.Visible:
					aborted++
					recs++
				default:
					recs++
				}
			}
			result := "identical"
			if diff != "" {
				result = "DIFFERENT: " + diff
				bad++
			}
			fmt.Fprintf(tw, "%s\t%d\t%d–%d\t%d\t%d\t%d\t%s\n", t, p, log.LogStart, log.HighWatermark, recs, markers, aborted, result)
		}
	}
	_ = tw.Flush()
	if bad > 0 {
		return fmt.Errorf("%d partitions differ", bad)
	}
	say("\nall partitions identical: same offsets, records, headers, timestamps, markers and read_committed visibility")
	return nil
}

// produceDemoTraffic writes plain records, committed transactions and one
// aborted transaction across the demo topics.
func produceDemoTraffic(ctx context.Context, seeds []string, records int) error {
	plain, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return err
	}
	defer plain.Close()
	txn, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.TransactionalID("kmirror-demo-producer"))
	if err != nil {
		return err
	}
	defer txn.Close()
	topics := []string{"orders", "payments"}
	var firstErr error
	for i := 0; i < records; i++ {
		r := &kgo.Record{Topic: topics[i%2], Key: []byte("key-" + strconv.Itoa(i%97)), Value: []byte("value-" + strconv.Itoa(i)),
			Headers: []kgo.RecordHeader{{Key: "source", Value: []byte("demo")}}}
		if i%50 == 0 {
			r.Value = nil // tombstones too
		}
		plain.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil && firstErr == nil {
				firstErr = err
			}
		})
		if i%1000 == 999 { // pace the traffic so that mirroring runs alongside it
			if err := plain.Flush(ctx); err != nil {
				return err
			}
			time.Sleep(100 * time.Millisecond)
		}
		if i%(records/10+1) == 0 {
			if err := demoTransaction(ctx, txn, i, i%(records/5+1) != 0); err != nil {
				return err
			}
		}
	}
	if err := plain.Flush(ctx); err != nil {
		return err
	}
	if firstErr != nil {
		return firstErr
	}
	return demoTransaction(ctx, txn, records, false) // the aborted one, last
}

func demoTransaction(ctx context.Context, cl *kgo.Client, n int, commit bool) error {
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	for j := 0; j < 5; j++ {
		r := &kgo.Record{Topic: []string{"orders", "payments"}[j%2], Key: []byte("txn-" + strconv.Itoa(n)), Value: []byte(fmt.Sprintf("txn %d record %d commit=%v", n, j, commit))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			return err
		}
	}
	return cl.EndTransaction(ctx, kgo.TransactionEndTry(commit))
}

// progress sums the engine's status.
func progress(st admin.Status) (mirrored, lag int64, states string) {
	count := map[string]int{}
	for _, m := range st.Mirrors {
		for _, p := range m.Partitions {
			count[p.State]++
			if p.LastMirroredOffset >= 0 {
				mirrored += p.LastMirroredOffset + 1
			}
			if p.Lag > 0 {
				lag += p.Lag
			}
		}
	}
	var parts []string
	for _, s := range []string{"PREPARING", "MIRRORING", "FAILED", "STOPPED"} {
		if count[s] > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", s, count[s]))
		}
	}
	return mirrored, lag, strings.Join(parts, " ")
}

// caughtUp reports whether every demo partition is mirrored up to the
// source's current high watermark.
func caughtUp(ctx context.Context, srcCl *kgo.Client, st admin.Status) bool {
	ends, err := kadm.NewClient(srcCl).ListEndOffsets(ctx, "orders", "payments")
	if err != nil {
		return false
	}
	seen := 0
	for _, m := range st.Mirrors {
		for _, p := range m.Partitions {
			if p.State == "FAILED" {
				return false
			}
			o, ok := ends.Lookup(p.Topic, p.Partition)
			if !ok || p.LastMirroredOffset+1 != o.Offset {
				return false
			}
			seen++
		}
	}
	return seen == 6
}
