package check

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
)

const (
	manifestsDir = "kubernetes"
	chartDir     = "helm/kmirror"
	configPath   = "/etc/kmirror/kmirror.yaml"
)

// strictDecoder decodes YAML into the Kubernetes API types, refusing
// unknown and duplicate fields (kubectl's --validate=strict).
var strictDecoder = func() runtime.Decoder {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return json.NewSerializerWithOptions(json.DefaultMetaFactory, s, s, json.SerializerOptions{Yaml: true, Strict: true})
}()

// decodeAll decodes every YAML document of src strictly.
func decodeAll(t *testing.T, where string, src []byte) []runtime.Object {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(src)))
	var out []runtime.Object
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		obj, gvk, err := strictDecoder.Decode(doc, nil, nil)
		if err != nil {
			t.Errorf("%s: %v", where, err)
			continue
		}
		if gvk.Kind == "" {
			t.Errorf("%s: a document without kind", where)
		}
		out = append(out, obj)
	}
}

func stripComments(doc []byte) []byte {
	var b bytes.Buffer
	for _, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.Bytes()
}

// objects sorts decoded objects by kind.
type objects struct {
	deployments []*appsv1.Deployment
	configMaps  map[string]*corev1.ConfigMap
	secrets     map[string]*corev1.Secret
	pvcs        map[string]*corev1.PersistentVolumeClaim
	others      []runtime.Object
}

func sortObjects(objs []runtime.Object) objects {
	o := objects{configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{}, pvcs: map[string]*corev1.PersistentVolumeClaim{}}
	for _, obj := range objs {
		switch v := obj.(type) {
		case *appsv1.Deployment:
			o.deployments = append(o.deployments, v)
		case *corev1.ConfigMap:
			o.configMaps[v.Name] = v
		case *corev1.Secret:
			o.secrets[v.Name] = v
		case *corev1.PersistentVolumeClaim:
			o.pvcs[v.Name] = v
		default:
			o.others = append(o.others, obj)
		}
	}
	return o
}

// checkDeployment checks what the deployment promises (docs/operations.md,
// "Deploying") on one set of objects, and returns the kmirror.yaml of the
// ConfigMap the Deployment mounts and the Secret's keys with the path they
// are mounted at.
func checkDeployment(t *testing.T, where string, o objects) (config []byte, secretDir string, secret *corev1.Secret) {
	t.Helper()
	if len(o.deployments) != 1 {
		t.Fatalf("%s: %d Deployments, want 1", where, len(o.deployments))
	}
	d := o.deployments[0]
	errorf := func(format string, args ...any) {
		t.Errorf("%s: Deployment %s: "+format, append([]any{where, d.Name}, args...)...)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
		errorf("replicas must be 1 (the file state store belongs to one process)")
	}
	if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		errorf("strategy must be Recreate, so that two pods never run on one state")
	}
	pod := d.Spec.Template
	for k, v := range map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "9644", "prometheus.io/path": "/metrics"} {
		if pod.Annotations[k] != v {
			errorf("pod annotation %s = %q, want %q", k, pod.Annotations[k], v)
		}
	}
	ps := pod.Spec
	if ps.EnableServiceLinks == nil || *ps.EnableServiceLinks {
		errorf("enableServiceLinks must be false: service links put KMIRROR_* variables in the environment")
	}
	if sc := ps.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		errorf("the pod must run as a non-root user (runAsNonRoot, runAsUser)")
	}
	if len(ps.Containers) != 1 {
		t.Fatalf("%s: %d containers, want 1", where, len(ps.Containers))
	}
	c := ps.Containers[0]
	if !slices.Equal(c.Args, []string{"run", "--config", configPath}) || len(c.Command) != 0 {
		errorf("the container runs %v %v, want the image's entrypoint with run --config %s", c.Command, c.Args, configPath)
	}
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		errorf("the container needs readOnlyRootFilesystem, no privilege escalation and all capabilities dropped")
	}
	probe := func(name string, p *corev1.Probe, path string) {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Port.String() != "http" {
			errorf("%s probe must GET %s on port http", name, path)
		}
	}
	probe("liveness", c.LivenessProbe, "/healthz")
	probe("readiness", c.ReadinessProbe, "/readyz")
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "http" && p.ContainerPort == 9644 }) {
		errorf("no container port http 9644")
	}
	if c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() {
		errorf("resources need a memory limit and a CPU request")
	}

	volumes := map[string]corev1.Volume{}
	for _, v := range ps.Volumes {
		volumes[v.Name] = v
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m.Name
		if _, ok := volumes[m.Name]; !ok {
			errorf("mount %s of an undeclared volume %s", m.MountPath, m.Name)
		}
	}
	cfgVol := volumes[mounts[filepath.Dir(configPath)]]
	if cfgVol.ConfigMap == nil {
		t.Fatalf("%s: %s is not mounted from a ConfigMap", where, filepath.Dir(configPath))
	}
	cm := o.configMaps[cfgVol.ConfigMap.Name]
	if cm == nil || cm.Data[filepath.Base(configPath)] == "" {
		t.Fatalf("%s: ConfigMap %s with key %s is not among the objects", where, cfgVol.ConfigMap.Name, filepath.Base(configPath))
	}
	config = []byte(cm.Data[filepath.Base(configPath)])
	var cfg struct {
		HTTPAddress string `json:"http.address"`
		State       struct {
			Type string `json:"type"`
			Dir  string `json:"dir"`
		} `json:"state"`
	}
	if err := yaml.Unmarshal(config, &cfg); err != nil {
		t.Fatalf("%s: kmirror.yaml: %v", where, err)
	}
	if cfg.HTTPAddress != "0.0.0.0:9644" {
		errorf("kmirror.yaml's http.address is %q: the probes and Prometheus need 0.0.0.0:9644", cfg.HTTPAddress)
	}
	stateVol, ok := volumes[mounts[cfg.State.Dir]]
	switch {
	case !ok:
		errorf("state.dir %q is not a mounted volume (the root file system is read-only)", cfg.State.Dir)
	case (cfg.State.Type == "" || cfg.State.Type == "file") && stateVol.PersistentVolumeClaim == nil:
		errorf("state.dir %q must be on a PersistentVolumeClaim: the file state store needs persistent storage", cfg.State.Dir)
	case stateVol.PersistentVolumeClaim != nil && o.pvcs[stateVol.PersistentVolumeClaim.ClaimName] == nil:
		errorf("PersistentVolumeClaim %s is not among the objects", stateVol.PersistentVolumeClaim.ClaimName)
	}
	if v, ok := volumes[mounts["/tmp"]]; !ok || v.EmptyDir == nil {
		errorf("/tmp must be an emptyDir: plugins' sockets live there and the root file system is read-only")
	}
	for path, name := range mounts {
		if v := volumes[name]; v.Secret != nil {
			secretDir, secret = path, o.secrets[v.Secret.SecretName]
			if secret == nil {
				t.Fatalf("%s: Secret %s is not among the objects", where, v.Secret.SecretName)
			}
		}
	}
	if secret == nil {
		errorf("no Secret is mounted for credentials")
	}
	return config, secretDir, secret
}

// validateConfig runs `kmirror config validate` on config, with every
// file path under secretDir (the mounted Secret) replaced by a placeholder
// file named for the Secret's key; a path to a key the Secret lacks fails.
func validateConfig(t *testing.T, where string, config []byte, secretDir string, secret *corev1.Secret) {
	t.Helper()
	keys := map[string]bool{}
	for k := range secret.Data {
		keys[k] = true
	}
	for k := range secret.StringData {
		keys[k] = true
	}
	tmp := t.TempDir()
	for k := range keys {
		if err := os.WriteFile(filepath.Join(tmp, k), []byte("placeholder"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(config, &cfg); err != nil {
		t.Fatal(err)
	}
	var sets []string
	used := 0
	override := func(prefix string, section map[string]any) {
		for k, v := range section {
			s, ok := v.(string)
			if !ok || !strings.HasPrefix(s, secretDir+"/") {
				continue
			}
			key := strings.TrimPrefix(s, secretDir+"/")
			if !keys[key] {
				t.Errorf("%s: %s%s points at %s, but the Secret %s has no key %q", where, prefix, k, s, secret.Name, key)
			}
			used++
			sets = append(sets, "--set", prefix+k+"="+filepath.Join(tmp, key))
		}
	}
	if d, ok := cfg["destination"].(map[string]any); ok {
		override("destination.", d)
	}
	ms, _ := cfg["mirrors"].([]any)
	for _, m := range ms {
		if m, ok := m.(map[string]any); ok {
			override(fmt.Sprintf("mirrors.%v.", m["name"]), m)
		}
	}
	if used == 0 {
		t.Errorf("%s: kmirror.yaml reads no credential from the Secret mounted at %s", where, secretDir)
	}
	cfgFile := filepath.Join(tmp, "kmirror.yaml")
	if err := os.WriteFile(cfgFile, config, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(kmirrorBinary(t), append([]string{"config", "validate", "--config", cfgFile}, sets...)...)
	cmd.Env = environWithout("KMIRROR_")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("%s: kmirror config validate refuses the ConfigMap's kmirror.yaml: %v\n%s", where, err, out)
	}
}

// environWithout is the environment less the variables with prefix.
func environWithout(prefix string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, prefix) {
			env = append(env, kv)
		}
	}
	return env
}

// kmirrorBinary is $KMIRROR_BIN, the kmirror binary that
// scripts/deploy-check.sh builds from this checkout.
func kmirrorBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("KMIRROR_BIN"); p != "" {
		return p
	}
	t.Fatal("KMIRROR_BIN is not set: run scripts/deploy-check.sh, or build kmirror (make build) and set KMIRROR_BIN to its path")
	return ""
}

// TestManifestsDecodeStrictlyAndDeploy: every object of deploy/kubernetes
// decodes strictly as its Kubernetes type, the Deployment keeps the
// deployment's promises, the kustomization lists every file, and the
// ConfigMap's kmirror.yaml passes `kmirror config validate`.
func TestManifestsDecodeStrictlyAndDeploy(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(deployDir, manifestsDir)
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", dir, err)
	}
	var objs []runtime.Object
	var listed []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(f) == "kustomization.yaml" {
			var k struct {
				APIVersion string   `json:"apiVersion"`
				Kind       string   `json:"kind"`
				Resources  []string `json:"resources"`
			}
			if err := yaml.UnmarshalStrict(b, &k); err != nil {
				t.Errorf("%s: %v", f, err)
			}
			listed = k.Resources
			continue
		}
		objs = append(objs, decodeAll(t, f, b)...)
	}
	var names []string
	for _, f := range files {
		if filepath.Base(f) != "kustomization.yaml" {
			names = append(names, filepath.Base(f))
		}
	}
	sort.Strings(names)
	sort.Strings(listed)
	if !slices.Equal(names, listed) {
		t.Errorf("kustomization.yaml lists %v; the directory holds %v", listed, names)
	}
	config, secretDir, secret := checkDeployment(t, dir, sortObjects(objs))
	if secret != nil {
		validateConfig(t, dir, config, secretDir, secret)
	}
}

// TestChartRendersStrictlyAndDeploys: the Helm chart passes helm's linter,
// renders with its default values through Helm's engine, every rendered
// object decodes strictly, the Deployment keeps the same promises, and the
// rendered kmirror.yaml passes `kmirror config validate`.
func TestChartRendersStrictlyAndDeploys(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(deployDir, chartDir)
	linter := lint.All(dir, nil, "kmirror", false)
	for _, m := range linter.Messages {
		if m.Severity >= support.WarningSev {
			t.Errorf("helm lint: %v", m)
		}
	}
	o := renderChart(t, nil)
	config, secretDir, secret := checkDeployment(t, "chart", o)
	if secret != nil {
		validateConfig(t, "chart", config, secretDir, secret)
	}
	if n := len(o.others); n != 1 {
		t.Errorf("chart: %d objects besides the Deployment, ConfigMap, Secret and PVC, want 1 (the Service)", n)
	}
}

// renderChart renders the chart with vals over its defaults and decodes
// every rendered object strictly.
func renderChart(t *testing.T, vals map[string]any) objects {
	t.Helper()
	ch, err := loader.Load(filepath.Join(deployDir, chartDir))
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: "kmirror", Namespace: "kmirror", IsInstall: true, Revision: 1}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := engine.Render(ch, rv)
	if err != nil {
		t.Fatalf("rendering the chart: %v", err)
	}
	var objs []runtime.Object
	for name, text := range rendered {
		if strings.HasSuffix(name, ".yaml") {
			objs = append(objs, decodeAll(t, name, []byte(text))...)
		}
	}
	return sortObjects(objs)
}

// TestChartValuesChangeWhatTheyShould renders the chart with the values an
// operator changes first and checks each takes effect, every object still
// decoding strictly.
func TestChartValuesChangeWhatTheyShould(t *testing.T) {
	t.Parallel()
	o := renderChart(t, map[string]any{
		"image":          map[string]any{"repository": "registry.internal/kmirror", "tag": "1.2.3"},
		"existingSecret": "kafka-credentials",
		"persistence":    map[string]any{"existingClaim": "kmirror-data"},
		"resources":      map[string]any{"limits": map[string]any{"memory": "4Gi"}},
		"podAnnotations": map[string]any{"team": "streaming"},
	})
	if len(o.deployments) != 1 {
		t.Fatalf("%d Deployments", len(o.deployments))
	}
	d := o.deployments[0]
	c := d.Spec.Template.Spec.Containers[0]
	if c.Image != "registry.internal/kmirror:1.2.3" {
		t.Errorf("image %s", c.Image)
	}
	if len(o.secrets) != 0 || len(o.pvcs) != 0 {
		t.Errorf("with existingSecret and existingClaim the chart still renders %d Secrets and %d claims", len(o.secrets), len(o.pvcs))
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName != "kafka-credentials" {
			t.Errorf("credentials from Secret %s, want existingSecret", v.Secret.SecretName)
		}
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName != "kmirror-data" {
			t.Errorf("state on claim %s, want existingClaim", v.PersistentVolumeClaim.ClaimName)
		}
	}
	if got := c.Resources.Limits.Memory().String(); got != "4Gi" {
		t.Errorf("memory limit %s", got)
	}
	if a := d.Spec.Template.Annotations; a["team"] != "streaming" || a["prometheus.io/scrape"] != "true" || a["checksum/config"] == "" {
		t.Errorf("pod annotations %v", a)
	}

	// Without persistence (only for a state store plugin) state.dir is an emptyDir.
	o = renderChart(t, map[string]any{"persistence": map[string]any{"enabled": false}})
	for _, v := range o.deployments[0].Spec.Template.Spec.Volumes {
		if v.Name == "state" && v.EmptyDir == nil {
			t.Errorf("persistence.enabled=false: the state volume is %+v", v.VolumeSource)
		}
	}
	if len(o.pvcs) != 0 {
		t.Errorf("persistence.enabled=false still renders a claim")
	}

	// A changed config changes the checksum, so the pod restarts with it.
	before := renderChart(t, nil).deployments[0].Spec.Template.Annotations["checksum/config"]
	after := renderChart(t, map[string]any{"config": map[string]any{"log.level": "debug"}}).deployments[0].Spec.Template.Annotations["checksum/config"]
	if before == after {
		t.Error("checksum/config does not change with the config")
	}
}

// TestChartRefusesMisspeltValues: values.schema.json makes Helm refuse a
// value the chart does not know, as kmirror refuses an unknown key.
func TestChartRefusesMisspeltValues(t *testing.T) {
	t.Parallel()
	ch, err := loader.Load(filepath.Join(deployDir, chartDir))
	if err != nil {
		t.Fatal(err)
	}
	for name, vals := range map[string]map[string]any{
		"unknown top-level value": {"existingSecrets": "x"},
		"unknown image value":     {"image": map[string]any{"repo": "x"}},
		"port out of range":       {"service": map[string]any{"port": 70000}},
	} {
		if _, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: "kmirror", Namespace: "kmirror", IsInstall: true}, chartutil.DefaultCapabilities); err == nil {
			t.Errorf("%s: the chart accepts %v", name, vals)
		}
	}
}
