package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/mirror"
	"github.com/kmirror/kmirror/core/verify"
	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// TestKmirrorThatIsNotASuperUserSaysWhatToConfigureBeforeAppendingAnything:
// on a destination with the standard authorizer, kmirror runs as bob, who
// may do everything by ALLOW ACLs but is not a super user, so the DENY WRITE
// for User:* that kmirror puts on its mirror topics binds him. kmirror's
// start-up write check finds that out: the mirror's error in describe (and
// the log) names User:bob and super.users, no partition starts and nothing
// is appended. Run as alice (a super user) instead, the mirror copies the
// topic with nothing lost.
func TestKmirrorThatIsNotASuperUserSaysWhatToConfigureBeforeAppendingAnything(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	topic := topicName(t, "")
	createTopic(t, ctx, superAdmin(t, source), topic, 2, 3, nil)
	producer := newClient(t, source, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic))
	for i := range 20 {
		produceSync(t, ctx, producer, &kgo.Record{Partition: int32(i % 2), Value: fmt.Appendf(nil, "before %d", i)})
	}
	alicePass, bobPass := securedUsers["alice"], securedUsers["bob"]
	// bob may do all kmirror does, as far as ALLOW rules go.
	sadm := superAdmin(t, secured)
	bobACLs := []*kadm.ACLBuilder{
		kadm.NewACLs().Clusters().Allow("User:bob").AllowHosts("*").Operations(kadm.OpAll),
		kadm.NewACLs().Topics(topic).ResourcePatternType(kadm.ACLPatternLiteral).Allow("User:bob").AllowHosts("*").Operations(kadm.OpAll),
		kadm.NewACLs().TransactionalIDs("*").ResourcePatternType(kadm.ACLPatternLiteral).Allow("User:bob").AllowHosts("*").Operations(kadm.OpAll),
		kadm.NewACLs().Groups("*").ResourcePatternType(kadm.ACLPatternLiteral).Allow("User:bob").AllowHosts("*").Operations(kadm.OpAll),
	}
	for _, b := range bobACLs {
		if res, err := sadm.CreateACLs(ctx, b); err != nil || res[0].Err != nil {
			t.Fatalf("creating bob's ACLs: %v %v", err, res)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, b := range bobACLs {
			if _, err := sadm.DeleteACLs(ctx, b); err != nil {
				t.Errorf("deleting bob's ACLs: %v", err)
			}
		}
	})
	dest := func(user, pass string) string {
		return fmt.Sprintf("destination:\n  bootstrap.servers: %s\n  security.protocol: SASL_PLAINTEXT\n  sasl.mechanism: SCRAM-SHA-512\n  sasl.username: %s\n  sasl.password: %s",
			secured.BootstrapServers(kafkatest.SASLPlaintext), user, pass)
	}
	// No ACL sync: the source has no ACLs, and syncing them would delete
	// bob's on the destination.
	d := startKmirrorWith(t, topic, []string{dest("bob", bobPass)}, `mirror.acl.include: ""`)
	var ms admin.MirrorStatus
	for {
		st, _ := d.status()
		if len(st.Mirrors) == 1 {
			ms = st.Mirrors[0]
			if strings.Contains(ms.Error, mirror.ErrCannotWrite.Error()) {
				break
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no write-check error in describe: %+v", ms)
		case <-time.After(250 * time.Millisecond):
		}
	}
	for _, want := range []string{"User:bob", "super.users", topic} {
		if !strings.Contains(ms.Error, want) {
			t.Fatalf("describe error %q does not mention %q", ms.Error, want)
		}
	}
	if !strings.Contains(d.log(), "super.users") {
		t.Fatal("the write-check error is not in kmirror's log")
	}
	time.Sleep(5 * time.Second) // two more refresh intervals: still nothing started
	if st, _ := d.status(); len(st.Mirrors) != 1 || len(st.Mirrors[0].Partitions) != 0 {
		t.Fatalf("partitions started although kmirror cannot write: %+v", st)
	}
	ends, err := sadm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil && o.Offset != 0 {
			t.Errorf("destination %s/%d has end offset %d, want nothing appended", o.Topic, o.Partition, o.Offset)
		}
	})
	if strings.Contains(d.log(), bobPass) {
		t.Fatal("the SASL password appears in kmirror's log")
	}
	// The fix: kmirror's destination principal is a super user (alice).
	d.stop(syscall.SIGTERM)
	cfg, err := os.ReadFile(d.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg = []byte(strings.Replace(string(cfg), dest("bob", bobPass), dest("alice", alicePass), 1))
	if !strings.Contains(string(cfg), "sasl.username: alice") {
		t.Fatal("could not switch the configuration to alice")
	}
	if err := os.WriteFile(d.cfgPath, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	d.start()
	for i := range 10 {
		produceSync(t, ctx, producer, &kgo.Record{Partition: int32(i % 2), Value: fmt.Appendf(nil, "after %d", i)})
	}
	d.waitMirrored(ctx, topic, 2)
	src := newClient(t, source, kafkatest.Identity{})
	alice := newClient(t, secured, kafkatest.Identity{Listener: kafkatest.SASLPlaintext, Mechanism: kafkatest.ScramSHA512, User: "alice", Password: alicePass})
	for p := int32(0); p < 2; p++ {
		if _, diff, err := verify.Partition(ctx, src, alice, topic, p); err != nil || diff != "" {
			t.Fatalf("partition %d differs from the source: %v %s", p, err, diff)
		}
	}
	if st, _ := d.status(); len(st.Mirrors) != 1 || strings.Contains(st.Mirrors[0].Error, mirror.ErrCannotWrite.Error()) {
		t.Fatalf("write-check error after the fix: %+v", st)
	}
}
