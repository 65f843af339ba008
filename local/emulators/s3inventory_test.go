package emulators_test

import (
	"compress/gzip"
	"crypto/md5"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/icehold/icehold/local/emulators"
)

// The inventory report is S3's documented layout: a manifest naming gzipped
// CSV data files with their sizes and MD5s, its checksum, a Hive symlink,
// and one row per version and delete marker, keys URL-encoded.
func TestS3InventoryReport(t *testing.T) {
	emu, err := emulators.NewS3(t.TempDir(), "whs", "inv")
	if err != nil {
		t.Fatal(err)
	}
	defer emu.Close()
	st := emu.Store
	put := func(key, body string) emulators.ObjectVersion {
		t.Helper()
		v, err := st.PutObject("whs", key, strings.NewReader(body), emulators.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	null := put("cat/a b/x.parquet", "null")
	if err := st.SetVersioning("whs", emulators.VersioningEnabled); err != nil {
		t.Fatal(err)
	}
	v1 := put("cat/t/../u/f", "12345")
	v2 := put("cat/t/../u/f", "123")
	marker, err := st.DeleteObject("whs", "cat/t/../u/f", "")
	if err != nil {
		t.Fatal(err)
	}
	put("other/y", "not in the report")
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	rep, err := st.WriteInventory("whs", emulators.InventoryConfig{ID: "all", DestinationBucket: "inv", DestinationPrefix: "reports/", Prefix: "cat/", RowsPerFile: 2}, at)
	if err != nil {
		t.Fatal(err)
	}
	if rep.ManifestKey != "reports/whs/all/2026-03-04T05-06Z/manifest.json" || rep.ChecksumKey != "reports/whs/all/2026-03-04T05-06Z/manifest.checksum" ||
		rep.Symlink != "reports/whs/all/hive/dt=2026-03-04-05-06/symlink.txt" || rep.Rows != 4 {
		t.Fatalf("report: %+v", rep)
	}
	read := func(key string) []byte {
		t.Helper()
		_, rc, err := st.GetObject("inv", key, "")
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		defer rc.Close()
		b, _ := io.ReadAll(rc)
		return b
	}
	raw := read(rep.ManifestKey)
	sum := md5.Sum(raw)
	if got := string(read(rep.ChecksumKey)); got != hex.EncodeToString(sum[:]) {
		t.Errorf("manifest.checksum %q, want the MD5 of manifest.json", got)
	}
	var m emulators.InventoryManifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if m.SourceBucket != "whs" || m.DestinationBucket != "arn:aws:s3:::inv" || m.Version != "2016-11-30" || m.FileFormat != "CSV" ||
		m.FileSchema != "Bucket, Key, VersionId, IsLatest, IsDeleteMarker, Size, LastModifiedDate" || m.CreationTimestamp != "1772600767000" || len(m.Files) != 2 {
		t.Fatalf("manifest: %s", raw)
	}
	var rows [][]string
	var symlink []string
	for _, f := range m.Files {
		if !strings.HasPrefix(f.Key, "reports/whs/all/data/") || !strings.HasSuffix(f.Key, ".csv.gz") {
			t.Errorf("data file %s", f.Key)
		}
		b := read(f.Key)
		sum := md5.Sum(b)
		if int64(len(b)) != f.Size || hex.EncodeToString(sum[:]) != f.MD5Checksum {
			t.Errorf("%s: %d bytes md5 %x, manifest says %d, %s", f.Key, len(b), sum, f.Size, f.MD5Checksum)
		}
		zr, err := gzip.NewReader(strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		plain, _ := io.ReadAll(zr)
		if !strings.HasPrefix(string(plain), `"whs","`) {
			t.Errorf("%s: fields not quoted: %s", f.Key, plain)
		}
		recs, err := csv.NewReader(strings.NewReader(string(plain))).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, recs...)
		symlink = append(symlink, "s3://inv/"+f.Key)
	}
	if got := strings.Fields(string(read(rep.Symlink))); !slices.Equal(got, symlink) {
		t.Errorf("symlink.txt %q, want %q", got, symlink)
	}
	ts := func(v emulators.ObjectVersion) string { return v.LastModified.UTC().Format("2006-01-02T15:04:05.000Z") }
	want := [][]string{
		{"whs", "cat/a+b/x.parquet", "", "true", "false", "4", ts(null)},
		{"whs", "cat/t/../u/f", marker.VersionID, "true", "true", "", ""},
		{"whs", "cat/t/../u/f", v2.VersionID, "false", "false", "3", ts(v2)},
		{"whs", "cat/t/../u/f", v1.VersionID, "false", "false", "5", ts(v1)},
	}
	if len(rows) != len(want) {
		t.Fatalf("rows %q, want %q", rows, want)
	}
	for i, r := range rows {
		if i == 1 {
			r[6] = "" // the marker's time is its own
		}
		if !slices.Equal(r, want[i]) {
			t.Errorf("row %d: %q, want %q", i, r, want[i])
		}
	}
	if k, _ := url.QueryUnescape(rows[0][1]); k != "cat/a b/x.parquet" {
		t.Errorf("the key decodes to %q", k)
	}
}
