package infra_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/icehold/icehold/infra"
)

// Defect: the delete function reserved 60 concurrent executions, which
// Lambda refuses on an account whose quota cannot leave 100 unreserved (a
// new account's): the first deploy failed there. By default nothing is
// reserved; the mapping's maximum concurrency bounds the deleters.
func TestNoReservedConcurrencyByDefault(t *testing.T) {
	for id, f := range resources("AWS::Lambda::Function") {
		if r, ok := f["Properties"].(map[string]any)["ReservedConcurrentExecutions"]; ok {
			t.Errorf("%s reserves %v concurrent executions", id, r)
		}
	}
	if max := mappingMaximum(t, resources); max != 50 {
		t.Errorf("the delete mapping's maximum concurrency is %v, want 50", max)
	}
}

// mappingMaximum is the SQS event source mapping's maximum concurrency.
func mappingMaximum(t *testing.T, of func(string) map[string]map[string]any) float64 {
	t.Helper()
	var found []float64
	for _, m := range of("AWS::Lambda::EventSourceMapping") {
		if sc, ok := m["Properties"].(map[string]any)["ScalingConfig"].(map[string]any); ok {
			v, _ := sc["MaximumConcurrency"].(float64)
			found = append(found, v)
		}
	}
	if len(found) != 1 {
		t.Fatalf("mappings with a maximum concurrency: %v, want the delete queue's only", found)
	}
	return found[0]
}

// Defect: the API stage had no throttling (a runaway client could spend the
// account's Lambda concurrency) and no access log (no one could see who
// called what). Every method of the stage is throttled at the defaults,
// and each request is a JSON line naming the caller's IAM ARN in a log group
// that keeps a year.
func TestAPIStageThrottledAndAccessLogged(t *testing.T) {
	logGroup := logicalID(t, "AWS::Logs::LogGroup", "ApiAccessLogs")
	type stage struct {
		name          string
		rate, burst   any
		logTo, format any
	}
	var stages []stage
	for id, s := range restResources("AWS::ApiGateway::Stage") {
		props := s["Properties"].(map[string]any)
		st := stage{name: "REST API stage " + id}
		for _, ms := range asList(props["MethodSettings"]) {
			if m := ms.(map[string]any); m["ResourcePath"] == "/*" && m["HttpMethod"] == "*" {
				st.rate, st.burst = m["ThrottlingRateLimit"], m["ThrottlingBurstLimit"]
			}
		}
		als, _ := props["AccessLogSetting"].(map[string]any)
		st.logTo, st.format = als["DestinationArn"], als["Format"]
		stages = append(stages, st)
	}
	for id, s := range resources("AWS::ApiGatewayV2::Stage") {
		props := s["Properties"].(map[string]any)
		rs, _ := props["DefaultRouteSettings"].(map[string]any)
		als, _ := props["AccessLogSettings"].(map[string]any)
		if props["StageName"] != "$default" || props["AutoDeploy"] != true {
			t.Errorf("HTTP API stage %s: %v %v, want $default, deployed automatically (its URL is the API's root)", id, props["StageName"], props["AutoDeploy"])
		}
		stages = append(stages, stage{"HTTP API stage " + id, rs["ThrottlingRateLimit"], rs["ThrottlingBurstLimit"], als["DestinationArn"], als["Format"]})
	}
	if len(stages) != 2 {
		t.Fatalf("%d stages, want one per front door", len(stages))
	}
	for _, st := range stages {
		if st.rate != float64(infra.DefaultAPIRate) || st.burst != float64(infra.DefaultAPIBurst) {
			t.Errorf("%s: throttled at %v/s, burst %v, want every route at %d/s, burst %d", st.name, st.rate, st.burst, infra.DefaultAPIRate, infra.DefaultAPIBurst)
		}
		if render(st.logTo) != "${"+unhash(logGroup)+".Arn}" {
			t.Errorf("%s: access logs go to %v, want the log group %s", st.name, st.logTo, logGroup)
		}
		format, _ := st.format.(string)
		line := regexp.MustCompile(`\$context\.error\.messageString`).ReplaceAllString(format, `"an \"error\""`)
		line = regexp.MustCompile(`\$context\.[a-zA-Z.]+`).ReplaceAllString(line, "-")
		var entry map[string]string
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Errorf("%s: an access log line is not JSON (%v): %s", st.name, err, line)
		}
		for _, v := range []string{"$context.identity.userArn", "$context.httpMethod", "$context.path", "$context.status", "$context.requestId"} {
			if !strings.Contains(format, v) {
				t.Errorf("%s: the access log lacks %s: %s", st.name, v, format)
			}
		}
	}
	if days := resources("AWS::Logs::LogGroup")[logGroup]["Properties"].(map[string]any)["RetentionInDays"]; days != float64(infra.DefaultAccessLogDays) {
		t.Errorf("access logs kept %v days, want %d", days, infra.DefaultAccessLogDays)
	}
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// The outputs are the ones docs/operations.md lists and the CLI and the
// LocalStack script name: one name for each thing everywhere (CatalogUri,
// not also ApiUrl or the Endpoint<hash> output LambdaRestApi adds).
func TestOutputsAreTheOnesTheDocsAndTheCLIName(t *testing.T) {
	outputs := map[string]bool{}
	for name := range (*template.ToJSON())["Outputs"].(map[string]any) {
		outputs[name] = true
	}
	// The switch between front doors (icehold:api=both) adds one.
	switchOutputs := map[string]bool{}
	for name := range (*byoTemplate.ToJSON())["Outputs"].(map[string]any) {
		switchOutputs[name] = true
	}
	if !switchOutputs["RestCatalogUri"] || !switchOutputs["CatalogUri"] {
		t.Errorf("icehold:api=both outputs %v, want CatalogUri (the HTTP API, where clients move) and RestCatalogUri", slices.Sorted(maps.Keys(switchOutputs)))
	}
	ops, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, _ := strings.Cut(string(ops), "The stack outputs:")
	listed, _, _ := strings.Cut(after, "Read them")
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("`([A-Za-z]+)`").FindAllStringSubmatch(listed, -1) {
		documented[m[1]] = true
	}
	if !maps.Equal(outputs, documented) {
		t.Errorf("the template's outputs %v, docs/operations.md lists %v", slices.Sorted(maps.Keys(outputs)), slices.Sorted(maps.Keys(documented)))
	}
	// Wherever the CLI, the scripts, the examples and the docs name an
	// output, it is one of them.
	named := regexp.MustCompile("stack's ([A-Z][A-Za-z]+) output|output `([A-Z][A-Za-z]+)`|Object\\.values\\(o\\)\\[0\\]\\.([A-Z][A-Za-z]+)")
	files, _ := filepath.Glob("../cmd/icehold/*.go")
	more, _ := filepath.Glob("../examples/*/*.go")
	files = append(append(files, more...), "../localstack/deploy.sh", "../README.md", "../docs/operations.md", "../docs/design/infra.md")
	seen := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range named.FindAllStringSubmatch(string(raw), -1) {
			name := m[1] + m[2] + m[3]
			seen[filepath.Base(f)] = true
			if !outputs[name] && !switchOutputs[name] {
				t.Errorf("%s names the output %s, which the stack does not have (%v)", f, name, slices.Sorted(maps.Keys(outputs)))
			}
		}
	}
	for _, f := range []string{"client.go", "deploy.sh", "operations.md"} {
		if !seen[f] {
			t.Errorf("%s names no output: the pattern is stale", f)
		}
	}
}

// Defect: nothing checked that an upgrade keeps the stateful resources: a
// renamed construct replaced the table or the bucket (retained: the new
// stack started empty beside the old data) or the queues (with batches
// waiting). infra/stateful.json holds every stateful resource's logical id,
// deletion policy and the properties whose change replaces it; a template
// that differs fails here, and the record changes only with a migration note
// in docs/operations.md (Upgrade notes), which names the record's digest.
func TestStatefulResourcesKeepTheirIdentity(t *testing.T) {
	raw, err := json.Marshal(template.ToJSON())
	if err != nil {
		t.Fatal(err)
	}
	got, err := infra.StatefulResources(raw, "Test")
	if err != nil {
		t.Fatal(err)
	}
	recorded, err := os.ReadFile(infra.StatefulRecord)
	if err != nil {
		t.Fatal(err)
	}
	var want []infra.Stateful
	if err := json.Unmarshal(recorded, &want); err != nil {
		t.Fatalf("%s: %v", infra.StatefulRecord, err)
	}
	byID := func(rs []infra.Stateful) map[string]string {
		out := map[string]string{}
		for _, r := range rs {
			b, _ := json.Marshal(r)
			var v any
			_ = json.Unmarshal(b, &v)
			b, _ = json.Marshal(v)
			out[r.LogicalID] = string(b)
		}
		return out
	}
	g, w := byID(got), byID(want)
	for _, id := range slices.Sorted(maps.Keys(w)) {
		switch {
		case g[id] == "":
			t.Errorf("%s is gone from the template: an upgrade would delete it (or, retained, orphan it) and start a new one empty; new stateful resources: %v", w[id], newIDs(g, w))
		case g[id] != w[id]:
			t.Errorf("%s changed: %s, recorded %s: a change of these properties replaces it", id, g[id], w[id])
		}
	}
	if n := newIDs(g, w); len(n) > 0 {
		t.Errorf("stateful resources not in %s: %v", infra.StatefulRecord, n)
	}
	if t.Failed() {
		out, _ := json.MarshalIndent(got, "", "  ")
		t.Logf("An upgrade from the recorded stack would replace the resources above. Keep the construct ids "+
			"and the properties, or write the migration in docs/operations.md (Upgrade notes), then record the "+
			"new set in infra/%s:\n%s", infra.StatefulRecord, out)
		return
	}
	sum := sha256.Sum256(recorded)
	digest := hex.EncodeToString(sum[:])[:12]
	// The switch between front doors (icehold:api=both) adds one.
	switchOutputs := map[string]bool{}
	for name := range (*byoTemplate.ToJSON())["Outputs"].(map[string]any) {
		switchOutputs[name] = true
	}
	if !switchOutputs["RestCatalogUri"] || !switchOutputs["CatalogUri"] {
		t.Errorf("icehold:api=both outputs %v, want CatalogUri (the HTTP API, where clients move) and RestCatalogUri", slices.Sorted(maps.Keys(switchOutputs)))
	}
	ops, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ops), fmt.Sprintf("`%s` %s", infra.StatefulRecord, digest)) {
		t.Errorf("infra/%s (digest %s) changed without its migration note: write it in docs/operations.md, Upgrade notes, and name the record there as `%s` %s",
			infra.StatefulRecord, digest, infra.StatefulRecord, digest)
	}
}

func newIDs(got, want map[string]string) []string {
	var out []string
	for id := range got {
		if _, ok := want[id]; !ok {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Every function knows the buckets its roles cover (the catalog refuses a
// warehouse elsewhere): here the bucket the stack made.
func TestFunctionsKnowTheCoveredBuckets(t *testing.T) {
	bucket := logicalID(t, "AWS::S3::Bucket", "Warehouse")
	for id, f := range resources("AWS::Lambda::Function") {
		vars, _ := f["Properties"].(map[string]any)["Environment"].(map[string]any)["Variables"].(map[string]any)
		if got := render(vars["ICEHOLD_WAREHOUSE_BUCKETS"]); got != "${"+unhash(bucket)+"}" {
			t.Errorf("%s: ICEHOLD_WAREHOUSE_BUCKETS %q, want the bucket %s", id, got, bucket)
		}
	}
}
