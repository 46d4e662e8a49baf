package doctor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/kclient"
	"github.com/kmirror/kmirror/sdk/auth"
)

const (
	roleDestination = "destination"
	roleSource      = "source"
)

// doctorTransactionalID is the transactional id the transactions check
// initialises on the destination: under kmirror's prefix (so that the ACL
// kmirror needs for its own ids covers it), and, without ':', never the id
// of a mirror's writer (kmirror-<mirror>:<topic>:<partition>:<producer>).
const doctorTransactionalID = "kmirror-doctor"

// clusterRun checks one cluster.
type clusterRun struct {
	opts   Options
	cl     *config.Cluster
	role   string
	report Cluster

	client *kgo.Client // nil until the SASL step passed
	adm    *kadm.Client
	// messageMax is the brokers' message.max.bytes, -1 when unknown.
	messageMax int64
}

func (r *clusterRun) add(step, result, detail, fix string) {
	r.report.Checks = append(r.report.Checks, Check{Step: step, Result: result, Detail: detail, Fix: fix})
}
func (r *clusterRun) pass(step, detail string)      { r.add(step, Pass, detail, "") }
func (r *clusterRun) fail(step, detail, fix string) { r.add(step, Fail, detail, fix) }
func (r *clusterRun) warn(step, detail, fix string) { r.add(step, Warn, detail, fix) }
func (r *clusterRun) skip(step, detail string)      { r.add(step, Skip, detail, "") }

// key names a configuration key of this cluster, for fixes.
func (r *clusterRun) key(k string) string {
	if r.role == roleDestination {
		return "destination." + k
	}
	return "mirrors." + r.report.Mirror + "." + k
}

// principal names the principal kmirror authenticates as on this cluster,
// for fixes: User:<sasl user>, or the client certificate's subject.
func (r *clusterRun) principal() string {
	if r.cl.UsesSASL() {
		if s, err := r.cl.SASL(); err == nil && s.Username != "" {
			return "User:" + s.Username
		} else if err == nil && s.Kerberos.Principal != "" {
			return "Kerberos principal " + s.Kerberos.Principal
		}
		return "kmirror's principal on this cluster"
	}
	if t, err := r.cl.TLS(); err == nil && t.Certificate != nil && t.Certificate.Leaf != nil {
		return "User:" + t.Certificate.Leaf.Subject.String()
	}
	return "User:ANONYMOUS"
}

func (r *clusterRun) close() {
	if r.client != nil {
		r.client.Close()
	}
}

// run runs the steps in order; a failed step skips those that need it.
// mirror and dst are set for a source cluster.
func (r *clusterRun) run(ctx context.Context, cfg *config.Config, mirror *config.Mirror, dst *clusterRun) {
	r.report.Bootstrap = r.cl.BootstrapServers
	r.report.Security = r.cl.SecurityProtocol
	if r.report.Security == "" {
		r.report.Security = config.ProtocolPlaintext
	}
	r.messageMax = -1
	addrs, ok := r.dns(ctx)
	if !ok {
		r.skip(StepRemaining, "the remaining steps need a reachable broker")
		return
	}
	up := r.tcp(ctx, addrs)
	if len(up) == 0 {
		r.skip(StepRemaining, "the remaining steps need a reachable broker")
		return
	}
	if r.cl.UsesTLS() {
		if !r.tlsChecks(ctx, up[0]) {
			r.skip(StepRemaining, "the remaining steps need a TLS connection the client trusts")
			return
		}
	} else {
		r.skip(StepTLS, r.key("security.protocol")+" is "+r.report.Security+": no TLS")
	}
	if !r.connect(ctx, mirror) {
		r.skip(StepRemaining, "the remaining steps need an authenticated connection")
		return
	}
	if !r.apiVersions(ctx) {
		return
	}
	r.readMessageMax(ctx)
	if r.role == roleDestination {
		r.destinationACLs(ctx)
		r.superUser(ctx)
		r.producerID(ctx, StepIdempotence, "")
		r.producerID(ctx, StepTransactions, doctorTransactionalID)
		return
	}
	r.sourceACLs(ctx, mirror)
	r.compareMessageMax(dst)
}

// connect builds the client as the daemon does (core/kclient) and asks for
// metadata: with SASL, that authenticates.
func (r *clusterRun) connect(ctx context.Context, mirror *config.Mirror) bool {
	if r.cl.UsesSASL() && r.cl.SASLCredentialsPlugin != "" && r.opts.inProcess {
		r.skip(StepSASL, "the credentials come from plugin "+r.cl.SASLCredentialsPlugin+" ("+r.key("sasl.credentials.plugin")+"), which doctor does not start: the daemon's log shows the authentication")
		return false
	}
	req := auth.Request{Role: r.role}
	if mirror != nil {
		req.Mirror = mirror.Name
	}
	opts, err := kclient.Opts(ctx, r.cl, r.opts.Credentials, req)
	if err != nil {
		r.fail(StepSASL, "the client cannot be built: "+err.Error(), "fix this cluster's security keys (kmirror config validate says which)")
		return false
	}
	opts = append(opts, kgo.DialTimeout(r.opts.StepTimeout), kgo.RequestRetries(1), kgo.RetryTimeout(r.opts.StepTimeout))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		r.fail(StepSASL, "the client cannot be built: "+err.Error(), "fix this cluster's security keys")
		return false
	}
	cctx, cancel := context.WithTimeout(ctx, r.opts.StepTimeout)
	defer cancel()
	_, err = kmsg.NewPtrMetadataRequest().RequestWith(cctx, cl)
	if err != nil {
		cl.Close()
		if !r.cl.UsesSASL() {
			r.fail(StepSASL, "no SASL; the broker did not answer a metadata request: "+err.Error(), "check "+r.key("security.protocol")+": the listener may require SASL or TLS")
			return false
		}
		users := "the brokers' JAAS configuration of the listener (user_<name>=\"<password>\") must hold this user"
		if strings.HasPrefix(r.cl.SASLMechanism, "SCRAM") {
			users = "the cluster must hold this user's " + r.cl.SASLMechanism + " credentials (kafka-configs.sh --alter --add-config '" + r.cl.SASLMechanism + "=[password=...]' --entity-type users --entity-name <user>)"
		}
		fix := "check " + r.key("sasl.username") + " and its password (" + r.key("sasl.password.file") + " or " + r.key("sasl.jaas.config") + "); " + users
		if r.cl.SASLMechanism == config.MechanismGSSAPI {
			fix = "check that " + r.key("sasl.kerberos.keytab") + " holds the current keys of " + r.key("sasl.kerberos.principal") + " (klist -kt <keytab>; a new ktadd changes them), that the KDC " + r.key("sasl.kerberos.krb5.conf") + " names answers, and that the brokers' principal <" + r.key("sasl.kerberos.service.name") + ">/<broker host>@REALM exists"
		}
		if errors.Is(err, kerr.UnsupportedSaslMechanism) || errors.Is(err, kerr.IllegalSaslState) {
			fix = "the broker's listener does not enable " + r.cl.SASLMechanism + " (sasl.enabled.mechanisms): use one it enables in " + r.key("sasl.mechanism")
		}
		if errors.Is(err, io.EOF) {
			err = errors.New("the broker closed the connection while authenticating (a wrong user or password, most likely)")
		}
		r.fail(StepSASL, fmt.Sprintf("%s authentication as %s failed: %v", r.cl.SASLMechanism, r.principal(), err), fix)
		return false
	}
	if r.cl.UsesSASL() {
		r.pass(StepSASL, fmt.Sprintf("authenticated as %s (%s)", r.principal(), r.cl.SASLMechanism))
	} else {
		r.skip(StepSASL, r.key("security.protocol")+" is "+r.report.Security+": no SASL")
	}
	r.client, r.adm = cl, kadm.NewClient(cl)
	return true
}

// neededAPIs are the requests kmirror sends to a cluster of each role.
var neededAPIs = map[string][]int16{
	roleSource: {
		kmsg.Fetch.Int16(), kmsg.ListOffsets.Int16(), kmsg.Metadata.Int16(), kmsg.OffsetFetch.Int16(),
		kmsg.ListGroups.Int16(), kmsg.DescribeConfigs.Int16(), kmsg.DescribeACLs.Int16(), kmsg.OffsetForLeaderEpoch.Int16(),
	},
	roleDestination: {
		kmsg.Produce.Int16(), kmsg.InitProducerID.Int16(), kmsg.AddPartitionsToTxn.Int16(), kmsg.EndTxn.Int16(),
		kmsg.CreateTopics.Int16(), kmsg.CreatePartitions.Int16(), kmsg.DescribeConfigs.Int16(), kmsg.IncrementalAlterConfigs.Int16(),
		kmsg.CreateACLs.Int16(), kmsg.DescribeACLs.Int16(), kmsg.DeleteACLs.Int16(), kmsg.OffsetCommit.Int16(), kmsg.ListOffsets.Int16(),
	},
}

// apiVersions asks every broker for its API versions and checks that each
// request kmirror sends is there.
func (r *clusterRun) apiVersions(ctx context.Context) bool {
	cctx, cancel := context.WithTimeout(ctx, r.opts.StepTimeout)
	defer cancel()
	vs, err := r.adm.ApiVersions(cctx)
	if err != nil {
		r.fail(StepAPIVersions, "ApiVersions failed: "+err.Error(), "check that every broker of the cluster is up")
		return false
	}
	var guesses, missing []string
	for _, v := range vs.Sorted() {
		if v.Err != nil {
			missing = append(missing, fmt.Sprintf("broker %d did not answer (%v)", v.NodeID, v.Err))
			continue
		}
		guesses = append(guesses, fmt.Sprintf("broker %d: %s", v.NodeID, v.VersionGuess()))
		for _, k := range neededAPIs[r.role] {
			if _, ok := v.KeyMaxVersion(k); !ok {
				missing = append(missing, fmt.Sprintf("broker %d lacks %s", v.NodeID, kmsg.NameForKey(k)))
			}
		}
	}
	if len(missing) > 0 {
		r.fail(StepAPIVersions, strings.Join(missing, "; "), "kmirror needs Kafka 2.8 or later on every broker (docs/design/contract.md); upgrade, or wait for the broker that did not answer")
		return false
	}
	r.pass(StepAPIVersions, "every request kmirror sends is supported ("+strings.Join(guesses, "; ")+")")
	return true
}

// readMessageMax reads the brokers' message.max.bytes (one broker's, as
// the brokers of a cluster share it).
func (r *clusterRun) readMessageMax(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, r.opts.StepTimeout)
	defer cancel()
	// A broker by its id: the cluster-wide default resource holds only
	// what was set dynamically, not a broker's effective value.
	md, err := r.adm.BrokerMetadata(cctx)
	if err != nil || len(md.Brokers) == 0 {
		return
	}
	rs, err := r.adm.DescribeBrokerConfigs(cctx, md.Brokers[0].NodeID)
	if err != nil {
		return
	}
	for _, rc := range rs {
		if rc.Err != nil {
			continue
		}
		for _, c := range rc.Configs {
			if c.Key == "message.max.bytes" && c.Value != nil {
				if n, err := strconv.ParseInt(*c.Value, 10, 64); err == nil {
					r.messageMax = n
					return
				}
			}
		}
	}
}

// compareMessageMax: a record batch the source accepted must fit the
// destination, or its partition fails with MESSAGE_TOO_LARGE.
func (r *clusterRun) compareMessageMax(dst *clusterRun) {
	switch {
	case dst == nil || dst.messageMax < 0:
		r.skip(StepMaxMessageBytes, "the destination's message.max.bytes is unknown (its checks failed, or DESCRIBE_CONFIGS on its cluster is not allowed)")
	case r.messageMax < 0:
		r.skip(StepMaxMessageBytes, "the source's message.max.bytes is unknown (DESCRIBE_CONFIGS on the cluster is not allowed)")
	case dst.messageMax < r.messageMax:
		r.fail(StepMaxMessageBytes, fmt.Sprintf("the destination's message.max.bytes %d is smaller than the source's %d: a batch between the two fails its partition (MESSAGE_TOO_LARGE)", dst.messageMax, r.messageMax),
			fmt.Sprintf("set message.max.bytes=%d (or more) on the destination brokers (kafka-configs.sh --alter --entity-type brokers --entity-default --add-config message.max.bytes=%d); topics' own max.message.bytes are copied from the source", r.messageMax, r.messageMax))
	default:
		r.pass(StepMaxMessageBytes, fmt.Sprintf("destination %d ≥ source %d", dst.messageMax, r.messageMax))
	}
}

// sourceACLs checks what the source's principal may do: DESCRIBE, READ and
// DESCRIBE_CONFIGS on the mirror's topics; DESCRIBE on its groups (their
// offsets are read); DESCRIBE on the cluster when ACLs are mirrored.
func (r *clusterRun) sourceACLs(ctx context.Context, m *config.Mirror) {
	cctx, cancel := context.WithTimeout(ctx, r.opts.StepTimeout)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.IncludeTopicAuthorizedOperations = true
	resp, err := req.RequestWith(cctx, r.client)
	if err != nil {
		r.fail(StepACLs, "metadata of every topic: "+err.Error(), "allow DESCRIBE on the source's topics for "+r.principal())
		return
	}
	var missing []string
	topics, unknown := 0, false
	want := []kadm.ACLOperation{kadm.OpDescribe, kadm.OpRead, kadm.OpDescribeConfigs}
	for _, t := range resp.Topics {
		if t.Topic == nil || t.IsInternal || !m.TopicsInclude.Match(*t.Topic) || m.TopicsExclude.Match(*t.Topic) {
			continue
		}
		topics++
		if t.AuthorizedOperations == math.MinInt32 {
			unknown = true
			continue
		}
		if lack := lacking(t.AuthorizedOperations, want); lack != "" {
			missing = append(missing, fmt.Sprintf("%s on topic %s", lack, *t.Topic))
		}
	}
	groups := r.groupACLs(cctx, m, &missing)
	if len(m.ACLInclude) > 0 {
		_ = r.clusterOps(cctx, []kadm.ACLOperation{kadm.OpDescribe}, &missing)
	}
	detail := fmt.Sprintf("%s may read the %d topic(s) and describe the %d group(s) in the mirror's scope", r.principal(), topics, groups)
	r.aclResult(missing, unknown, detail, "kafka-acls.sh --add --allow-principal "+r.principal()+" --operation Describe --operation Read --operation DescribeConfigs --topic <topic> (or --resource-pattern-type prefixed), and --operation Describe --group <group>")
}

// groupACLs checks DESCRIBE on the mirror's groups; it returns how many
// were checked.
func (r *clusterRun) groupACLs(ctx context.Context, m *config.Mirror, missing *[]string) int {
	listed, err := r.adm.ListGroups(ctx)
	if err != nil {
		*missing = append(*missing, "listing groups: "+err.Error())
		return 0
	}
	var names []string
	for _, g := range listed.Groups() {
		if m.GroupsInclude.Match(g) && !m.GroupsExclude.Match(g) {
			names = append(names, g)
		}
	}
	if len(names) == 0 {
		return 0
	}
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = names
	req.IncludeAuthorizedOperations = true
	shards := r.client.RequestSharded(ctx, req)
	for _, sh := range shards {
		if sh.Err != nil {
			continue
		}
		for _, g := range sh.Resp.(*kmsg.DescribeGroupsResponse).Groups {
			if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
				*missing = append(*missing, fmt.Sprintf("DESCRIBE on group %s (%v)", g.Group, err))
				continue
			}
			if g.AuthorizedOperations == math.MinInt32 {
				continue
			}
			if lack := lacking(g.AuthorizedOperations, []kadm.ACLOperation{kadm.OpDescribe}); lack != "" {
				*missing = append(*missing, fmt.Sprintf("%s on group %s", lack, g.Group))
			}
		}
	}
	return len(names)
}

// clusterAuthorized returns the operations the principal may perform on
// the cluster resource, or ok false when the brokers do not say.
func (r *clusterRun) clusterAuthorized(ctx context.Context) (int32, bool, error) {
	req := kmsg.NewPtrDescribeClusterRequest()
	req.IncludeClusterAuthorizedOperations = true
	resp, err := req.RequestWith(ctx, r.client)
	if err != nil {
		return 0, false, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return 0, false, err
	}
	if resp.ClusterAuthorizedOperations == math.MinInt32 {
		return 0, false, nil
	}
	return resp.ClusterAuthorizedOperations, true, nil
}

// clusterOps adds to missing the operations of want the principal may not
// perform on the cluster; it reports whether the brokers said.
func (r *clusterRun) clusterOps(ctx context.Context, want []kadm.ACLOperation, missing *[]string) bool {
	ops, ok, err := r.clusterAuthorized(ctx)
	switch {
	case err != nil:
		*missing = append(*missing, "describing the cluster: "+err.Error())
	case ok:
		if lack := lacking(ops, want); lack != "" {
			*missing = append(*missing, lack+" on the cluster")
		}
	}
	return ok || err != nil
}

// destinationACLs checks CREATE, ALTER, DESCRIBE, DESCRIBE_CONFIGS,
// ALTER_CONFIGS and IDEMPOTENT_WRITE on the destination cluster (topics,
// configs, ACLs and idempotent appends are created there); WRITE on the
// mirror topics is what the super-user step is about.
func (r *clusterRun) destinationACLs(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, r.opts.StepTimeout)
	defer cancel()
	var missing []string
	want := []kadm.ACLOperation{kadm.OpCreate, kadm.OpAlter, kadm.OpDescribe, kadm.OpDescribeConfigs, kadm.OpAlterConfigs, kadm.OpIdempotentWrite}
	known := r.clusterOps(cctx, want, &missing)
	r.aclResult(missing, !known, r.principal()+" may create topics, alter their configs and ACLs, and write idempotently on the cluster",
		"kafka-acls.sh --add --allow-principal "+r.principal()+" --cluster --operation Create --operation Alter --operation Describe --operation DescribeConfigs --operation AlterConfigs --operation IdempotentWrite (or make it a super user, which the next step needs anyway)")
}

func (r *clusterRun) aclResult(missing []string, unknown bool, detail, fix string) {
	switch {
	case len(missing) > 0:
		sort.Strings(missing)
		if len(missing) > 10 {
			missing = append(missing[:10], fmt.Sprintf("and %d more", len(missing)-10))
		}
		r.fail(StepACLs, r.principal()+" lacks "+strings.Join(missing, "; "), fix)
	case unknown:
		r.skip(StepACLs, "the brokers do not report authorized operations (Kafka before 2.3): not checked")
	default:
		r.pass(StepACLs, detail)
	}
}

// lacking names the operations of want that ops (an authorized-operations
// bit field) lacks, upper case as Kafka names them.
func lacking(ops int32, want []kadm.ACLOperation) string {
	have := kadm.DecodeACLOperations(ops)
	var out []string
	for _, w := range want {
		if !slices.Contains(have, w) {
			out = append(out, strings.ToUpper(w.String()))
		}
	}
	return strings.Join(out, ", ")
}

// superUser: kmirror keeps mirror topics read-only with a DENY WRITE ACL
// for User:*, which binds every principal that is not a super user, so its
// own destination principal must be one (the daemon checks the same at
// start-up, core/topicsync). Read-only, doctor cannot create that ACL to
// test it; it takes every operation on the cluster resource, CLUSTER_ACTION
// included (which only brokers and super users normally have), as the
// sign of a super user.
func (r *clusterRun) superUser(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, r.opts.StepTimeout)
	defer cancel()
	if _, err := r.adm.DescribeACLs(cctx, kadm.NewACLs().AnyResource().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny)); errors.Is(err, kerr.SecurityDisabled) {
		r.pass(StepSuperUser, "the destination has no authorizer: ACLs are not enforced (nor are kmirror's read-only ACLs on mirror topics)")
		return
	}
	ops, ok, err := r.clusterAuthorized(cctx)
	switch {
	case err != nil:
		r.fail(StepSuperUser, "describing the cluster: "+err.Error(), "allow DESCRIBE on the cluster for "+r.principal())
	case !ok:
		r.skip(StepSuperUser, "the brokers do not report authorized operations: not checked (the daemon checks at start-up)")
	case lacking(ops, []kadm.ACLOperation{kadm.OpAlter, kadm.OpAlterConfigs, kadm.OpClusterAction, kadm.OpCreate, kadm.OpDescribe, kadm.OpDescribeConfigs, kadm.OpIdempotentWrite}) == "":
		r.pass(StepSuperUser, r.principal()+" may perform every operation on the cluster: a super user")
	default:
		r.fail(StepSuperUser, r.principal()+" is not a super user of the destination: kmirror's DENY WRITE ACL for User:* on mirror topics would stop its own appends",
			"add "+r.principal()+" to super.users in every destination broker's server.properties (super.users=User:a;User:b) and restart them")
	}
}

// producerID asks for a producer id: without a transactional id
// (idempotence) or with one (transactions; the id then exists on the
// destination until transactional.id.expiration.ms).
func (r *clusterRun) producerID(ctx context.Context, step, txnID string) {
	cctx, cancel := context.WithTimeout(ctx, r.opts.StepTimeout)
	defer cancel()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionTimeoutMillis = 60000
	if txnID != "" {
		req.TransactionalID = kmsg.StringPtr(txnID)
	}
	// A retriable error (the transaction coordinator loading, or
	// __transaction_state being created on first use) is retried within
	// the step's time.
	var resp *kmsg.InitProducerIDResponse
	var err error
	for {
		resp, err = req.RequestWith(cctx, r.client)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err == nil || !kerr.IsRetriable(err) || cctx.Err() != nil {
			break
		}
		backoff := time.NewTimer(250 * time.Millisecond)
		select {
		case <-cctx.Done():
			backoff.Stop()
		case <-backoff.C:
		}
	}
	what, fix := "an idempotent producer", "allow IDEMPOTENT_WRITE on the destination cluster for "+r.principal()+" (or make it a super user)"
	if txnID != "" {
		what = "a transactional producer (" + txnID + ")"
		fix = "allow WRITE and DESCRIBE on transactional ids prefixed kmirror- for " + r.principal() + " (kafka-acls.sh --add --allow-principal " + r.principal() + " --operation Write --operation Describe --transactional-id kmirror- --resource-pattern-type prefixed), or make it a super user; the brokers need transaction.state.log.replication.factor ≤ their number"
	}
	switch {
	case err == nil:
		r.pass(step, fmt.Sprintf("InitProducerId for %s: producer id %d", what, resp.ProducerID))
	case errors.Is(err, kerr.CoordinatorNotAvailable):
		r.fail(step, fmt.Sprintf("InitProducerId for %s: %v", what, err), "the transaction coordinator is not available: check __transaction_state (its replication factor and min.insync.replicas against the number of brokers)")
	default:
		r.fail(step, fmt.Sprintf("InitProducerId for %s: %v", what, err), fix)
	}
}
