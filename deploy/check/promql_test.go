package check

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

const (
	deployDir     = ".."
	dashboardFile = "grafana/kmirror.json"
	rulesFile     = "prometheus/kmirror-rules.yaml"
	metricsFile   = "metrics.txt"
)

// exported reads deploy/metrics.txt (proved by deploy/metrics_test.go in
// the daemon's module): metric name → type.
func exported(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployDir, metricsFile))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && !strings.HasPrefix(f[0], "#") {
			out[f[0]] = f[1]
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s lists no metric", metricsFile)
	}
	return out
}

// knownMetric reports whether a selector's metric name is exported: a
// listed name, a histogram's or summary's _bucket/_sum/_count series, or
// Prometheus's own `up`.
func knownMetric(metrics map[string]string, name string) bool {
	if name == "up" {
		return true
	}
	if _, ok := metrics[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		if typ := metrics[base]; typ == "histogram" || (typ == "summary" && suffix != "_bucket") {
			return true
		}
	}
	return false
}

var promqlParser = parser.NewParser(parser.Options{})

// checkQuery parses q as PromQL and fails the test for every problem
// queryProblems finds.
func checkQuery(t *testing.T, where, q string, metrics map[string]string) {
	t.Helper()
	for _, p := range queryProblems(q, metrics) {
		t.Errorf("%s: %s\nquery: %s", where, p, q)
	}
}

// queryProblems parses q as PromQL and returns what is wrong with it: a
// parse error, a metric selector whose name is not exported, a selector
// that does not name its metric, or no selector at all.
func queryProblems(q string, metrics map[string]string) []string {
	expr, err := promqlParser.ParseExpr(q)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	selectors := 0
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		selectors++
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == model.MetricNameLabel && m.Type != labels.MatchEqual {
				problems = append(problems, fmt.Sprintf("selector %s matches metric names by %s; name the metric so the check can see it", vs, m.Type))
				return nil
			}
			if m.Name == model.MetricNameLabel {
				name = m.Value
			}
		}
		if !knownMetric(metrics, name) {
			problems = append(problems, fmt.Sprintf("metric %q is not one the daemon exports (deploy/metrics.txt)", name))
		}
		return nil
	})
	if selectors == 0 {
		problems = append(problems, "the query selects no metric")
	}
	return problems
}

// grafanaVar matches a Grafana template variable in a query: $name,
// ${name} or ${name:format}.
var grafanaVar = regexp.MustCompile(`\$(\{(\w+)(:\w+)?\}|(\w+))`)

// expandGrafana replaces Grafana's variables by what Grafana puts there:
// a duration for the interval variables, a regex matching anything for the
// dashboard's own variables (they appear in =~ matchers or quoted).
func expandGrafana(q string) string {
	return grafanaVar.ReplaceAllStringFunc(q, func(v string) string {
		name := strings.Trim(v, "${}")
		name, _, _ = strings.Cut(name, ":")
		switch name {
		case "__rate_interval", "__interval", "__range":
			return "5m"
		case "__interval_ms", "__range_ms":
			return "300000"
		}
		return ".*"
	})
}

// labelValues matches a Grafana template query label_values(selector, label).
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*(\w+)\)$`)

// dashboardQueries returns every PromQL query of the dashboard, by where it
// is: each panel target's expr (rows' nested panels included) and each
// template variable's label_values selector.
func dashboardQueries(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployDir, dashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	out := map[string]string{}
	ids := map[int]string{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			// What Grafana needs to lay out and query the panel.
			if other, dup := ids[p.ID]; dup || p.ID == 0 {
				t.Errorf("%s: panel %q has id %d (also %q); ids must be unique and non-zero", dashboardFile, p.Title, p.ID, other)
			}
			ids[p.ID] = p.Title
			if g := p.GridPos; g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
				t.Errorf("%s: panel %q: gridPos %+v outside Grafana's 24 columns", dashboardFile, p.Title, g)
			}
			if p.Type != "row" && (p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != "${datasource}") {
				t.Errorf("%s: panel %q does not query the dashboard's Prometheus data source variable", dashboardFile, p.Title)
			}
			for _, tg := range p.Targets {
				if tg.Expr == "" {
					t.Errorf("%s: panel %q target %s has no expr", dashboardFile, p.Title, tg.RefID)
				}
				out["panel "+p.Title+" target "+tg.RefID] = tg.Expr
			}
			if p.Type != "row" && p.Type != "text" && len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", dashboardFile, p.Title)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			// Older dashboards keep the query as a plain string.
			if err := json.Unmarshal(v.Query, &q.Query); err != nil {
				t.Fatalf("%s: variable %s: query: %v", dashboardFile, v.Name, err)
			}
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			t.Errorf("%s: variable %s: query %q is not label_values(selector, label)", dashboardFile, v.Name, q.Query)
			continue
		}
		out["variable "+v.Name] = m[1]
	}
	return out
}

type panel struct {
	ID      int    `json:"id"`
	Title   string `json:"title"`
	Type    string `json:"type"`
	GridPos struct {
		X int `json:"x"`
		Y int `json:"y"`
		W int `json:"w"`
		H int `json:"h"`
	} `json:"gridPos"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

// TestDashboardQueriesUseExportedMetrics: every query of the Grafana
// dashboard parses as PromQL and selects only metrics the daemon exports.
func TestDashboardQueriesUseExportedMetrics(t *testing.T) {
	t.Parallel()
	metrics := exported(t)
	queries := dashboardQueries(t)
	if len(queries) < 10 {
		t.Fatalf("%s: only %d queries found", dashboardFile, len(queries))
	}
	for where, q := range queries {
		checkQuery(t, dashboardFile+": "+where, expandGrafana(q), metrics)
	}
}

// TestRulesPassPromtoolAndUseExportedMetrics: the rules file parses and
// validates as `promtool check rules` does it (rulefmt, unknown fields
// refused, templates parsed, no duplicate rule), and every rule's
// expression selects only metrics the daemon exports.
func TestRulesPassPromtoolAndUseExportedMetrics(t *testing.T) {
	t.Parallel()
	metrics := exported(t)
	path := filepath.Join(deployDir, rulesFile)
	groups, errs := rulefmt.ParseFile(path, false, model.UTF8Validation, promqlParser, slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Error(err)
	}
	if groups == nil {
		t.FailNow()
	}
	alerts := map[string]bool{}
	for _, g := range groups.Groups {
		seen := map[string]bool{}
		for _, r := range g.Rules {
			name := r.Alert + r.Record
			// promtool's duplicate check: one rule per name and labels in a group.
			key := name + "\x00" + labels.FromMap(r.Labels).String()
			if seen[key] {
				t.Errorf("%s: group %s: rule %s is defined twice", rulesFile, g.Name, name)
			}
			seen[key] = true
			alerts[r.Alert] = true
			if r.Alert != "" && (r.Annotations["summary"] == "" || r.Annotations["description"] == "" || r.Labels["severity"] == "") {
				t.Errorf("%s: alert %s lacks a summary, a description or a severity", rulesFile, r.Alert)
			}
			checkQuery(t, rulesFile+": "+name, r.Expr, metrics)
		}
	}
	// The alerts the deployment promises (docs/operations.md, "Deploying").
	for _, a := range []string{"KmirrorDown", "KmirrorFailedPartitions", "KmirrorLagGrowing", "KmirrorNoProgress", "KmirrorGroupOffsetSyncErrors"} {
		if !alerts[a] {
			t.Errorf("%s: no alert %s", rulesFile, a)
		}
	}
}

// TestCheckRefusesAnUnexportedMetric proves the check itself: a query on a
// metric the daemon does not export, or a histogram suffix on a gauge,
// fails it.
func TestCheckRefusesAnUnexportedMetric(t *testing.T) {
	t.Parallel()
	metrics := exported(t)
	for _, q := range []string{
		`kmirror_no_such_metric > 0`,
		`rate(kmirror_max_lag_bucket[5m])`,
		`{__name__=~"kmirror_.*"}`,
		`sum(rate(kmirror_mirrored_bytes_total[5m])`,
	} {
		if len(queryProblems(q, metrics)) == 0 {
			t.Errorf("the check accepted %q", q)
		}
	}
	for _, q := range []string{`up == 0`, `histogram_quantile(0.9, rate(kmirror_fetch_request_latency_seconds_bucket[5m]))`, expandGrafana(`kmirror_max_lag{mirror=~"$mirror"}[$__rate_interval]`)} {
		checkQuery(t, "probe", q, metrics)
	}
}
