package destfaults

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kmirror/kmirror/e2e/kafkatest"
	"github.com/kmirror/kmirror/e2e/kmirrortest"
)

// Clusters of every test of the package, started by TestMain.
var (
	// source is a one-broker cluster.
	source *kafkatest.Cluster
	// destination is a three-broker cluster: replication factor 3 by
	// default, for mirrored topics and Kafka's internal topics alike.
	// Broker tinyBroker keeps its partitions on tinyVolume.
	destination *kafkatest.Cluster
)

// tinyBroker is the destination broker whose log.dirs is tinyVolume (its
// KRaft metadata log stays on the ordinary disk, so that only appends to
// partitions fill the volume).
const tinyBroker = 2

// tinyVolume is the tmpfs mount that holds tinyBroker's partitions, ""
// when TestMain could not mount one (not root). It is mounted large
// (tinyRoom) and shrunk by the disk-full test to what it holds plus a
// little (tmpfs resizes in place: mount -o remount,size=…).
var tinyVolume string

// tinyRoom is tinyVolume's size outside the disk-full test: tmpfs takes
// memory only for what it holds, so a large size costs nothing.
const tinyRoom = 1 << 30

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	began := time.Now()

	// A busy CI machine runs this package's four JVMs next to the other
	// e2e packages' brokers: give them longer than the default to serve.
	const startTimeout = 4 * time.Minute
	dstOpts := kafkatest.Options{Name: "destination", Brokers: 3, StartTimeout: startTimeout,
		// Leadership moves only when a test moves it: no preferred-leader
		// rebalance moves a transaction coordinator under the leader test
		// after the disk-full test restarted a broker.
		BrokerConfig: map[string]string{"auto.leader.rebalance.enable": "false"}}
	if os.Geteuid() == 0 {
		vol, meta, cleanup, err := mountTinyVolume()
		if err != nil {
			fmt.Fprintf(os.Stderr, "destfaults: %v\n", err)
			return 1
		}
		defer cleanup()
		tinyVolume = vol
		dstOpts.NodeConfig = map[int]map[string]string{tinyBroker: {"log.dirs": vol, "metadata.log.dir": meta}}
	} else {
		log.Printf("destfaults: not root: no tmpfs for destination broker %d; the disk-full test is skipped", tinyBroker)
	}

	specs := []struct {
		into **kafkatest.Cluster
		opts kafkatest.Options
	}{
		{&source, kafkatest.Options{Name: "source", Brokers: 1, StartTimeout: startTimeout}},
		{&destination, dstOpts},
	}
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i, s := range specs {
		wg.Go(func() {
			c, err := kafkatest.Start(ctx, s.opts)
			*s.into, errs[i] = c, err
		})
	}
	wg.Wait()
	defer func() {
		for _, s := range specs {
			if c := *s.into; c != nil {
				if err := c.Close(); err != nil {
					log.Printf("destfaults: %v", err)
				}
			}
		}
	}()
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(os.Stderr, "destfaults: starting the test clusters failed: %v\n", err)
		return 1
	}
	log.Printf("destfaults: Apache Kafka %s: source (1 broker) and destination (3 brokers; broker %d's log dir on tmpfs %q) up in %s",
		source.Version(), tinyBroker, tinyVolume, time.Since(began).Round(100*time.Millisecond))
	defer kmirrortest.RemoveBinary() // the kmirror binary the tests built
	return m.Run()
}

// mountTinyVolume mounts a tmpfs of tinyRoom bytes for tinyBroker's
// log.dirs and makes a directory for its metadata log; cleanup unmounts
// and removes both (after the clusters closed: deferred first).
func mountTinyVolume() (vol, meta string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "kmirror-destfaults-")
	if err != nil {
		return "", "", nil, err
	}
	vol, meta = filepath.Join(dir, "tiny"), filepath.Join(dir, "metadata")
	for _, d := range []string{vol, meta} {
		if err := os.Mkdir(d, 0o700); err != nil {
			os.RemoveAll(dir)
			return "", "", nil, err
		}
	}
	if err := syscall.Mount("tmpfs", vol, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", tinyRoom)); err != nil {
		os.RemoveAll(dir)
		return "", "", nil, fmt.Errorf("mounting a tmpfs on %s for destination broker %d: %w", vol, tinyBroker, err)
	}
	return vol, meta, func() {
		if err := syscall.Unmount(vol, syscall.MNT_DETACH); err != nil {
			log.Printf("destfaults: unmounting %s: %v", vol, err)
		}
		os.RemoveAll(dir)
	}, nil
}

// resizeTinyVolume sets tinyVolume's size to size bytes (rounded up to
// pages by the kernel); a tmpfs refuses a size below what it holds.
func resizeTinyVolume(size int64) error {
	return syscall.Mount("tmpfs", tinyVolume, "tmpfs", syscall.MS_REMOUNT, fmt.Sprintf("size=%d,mode=0700", size))
}

// tinyVolumeUsage returns the bytes tinyVolume holds and its size.
func tinyVolumeUsage() (used, size int64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(tinyVolume, &st); err != nil {
		return 0, 0, err
	}
	return int64(st.Blocks-st.Bfree) * st.Bsize, int64(st.Blocks) * st.Bsize, nil
}
