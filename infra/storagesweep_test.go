package infra_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/icehold/icehold/infra"
	"github.com/icehold/icehold/shared/storagesweep"
)

// The bucket the stack makes has the daily S3 Inventory the storage sweep
// reads: every version, CSV, with the fields the reader needs, delivered
// to the inventory bucket; S3 may write there from every warehouse bucket
// (a brought one's inventory is the operator's) and nothing else may.
func TestStorageSweepInventory(t *testing.T) {
	inv := logicalID(t, "AWS::S3::Bucket", "Inventory")
	var conf map[string]any
	for id, b := range resources("AWS::S3::Bucket") {
		if id == inv {
			continue
		}
		cs, _ := b["Properties"].(map[string]any)["InventoryConfigurations"].([]any)
		if len(cs) != 1 {
			t.Fatalf("warehouse %s: inventory configurations %v, want one", id, cs)
		}
		conf = cs[0].(map[string]any)
	}
	dest, _ := json.Marshal(conf["Destination"])
	if conf["Id"] != infra.InventoryID || conf["Enabled"] != true || conf["ScheduleFrequency"] != "Daily" || conf["IncludedObjectVersions"] != "All" ||
		!strings.Contains(string(dest), `"Format":"CSV"`) || !strings.Contains(string(dest), `"Prefix":"`+infra.InventoryPrefix+`"`) ||
		!strings.Contains(string(dest), `"`+inv+`"`) {
		t.Errorf("inventory configuration %v", conf)
	}
	// Every report of all versions has these; the others must be named.
	fields := append([]string{"Bucket", "Key", "VersionId", "IsLatest", "IsDeleteMarker"}, strs(conf["OptionalFields"])...)
	for _, f := range storagesweep.Fields {
		if !slices.Contains(fields, f) {
			t.Errorf("the inventory has no %s, which the sweep reads (fields %v)", f, fields)
		}
	}

	for name, of := range map[string]func(string) map[string]map[string]any{"own bucket": resources, "brought buckets": byoResources} {
		var delivery []any
		for _, p := range of("AWS::S3::BucketPolicy") {
			props := p["Properties"].(map[string]any)
			if b, _ := json.Marshal(props["Bucket"]); !strings.Contains(string(b), logicalIDIn(t, of, "AWS::S3::Bucket", "Inventory")) {
				continue
			}
			for _, st := range props["PolicyDocument"].(map[string]any)["Statement"].([]any) {
				if st.(map[string]any)["Sid"] == "InventoryDelivery" {
					delivery = append(delivery, st)
				}
			}
		}
		raw, _ := json.Marshal(delivery)
		if len(delivery) != 1 || !strings.Contains(string(raw), "s3.amazonaws.com") || !strings.Contains(string(raw), "aws:SourceAccount") {
			t.Errorf("%s: inventory delivery statement %s", name, raw)
		}
		if name == "brought buckets" && !strings.Contains(string(raw), "team-lake") {
			t.Errorf("%s: S3 may not deliver team-lake's reports: %s", name, raw)
		}
	}
}
