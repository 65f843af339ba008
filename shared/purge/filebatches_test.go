package purge

import (
	"fmt"
	"slices"
	"testing"

	"github.com/icehold/icehold/shared/store"
)

// A batch keeps each file's size and kind beside it through sorting,
// de-duplication and the cut into one-bucket batches; a list that says
// nothing of sizes or kinds (an orphans job's) writes neither.
func TestFileBatchesKeepSizesAndKinds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []store.ListedFile
		want  []store.Batch
	}{
		{"described", []store.ListedFile{
			{Path: "s3://bkt-b/t/data/2.parquet", Size: 20, Kind: store.FileDeletes},
			{Path: "s3://bkt-a/t/metadata/m.avro", Size: 5, Kind: store.FileMetadata},
			{Path: "s3://bkt-b/t/data/1.parquet", Size: 10, Kind: store.FileData},
			{Path: "s3://bkt-b/t/data/2.parquet", Size: 20, Kind: store.FileDeletes},
			{Path: "not-a-uri", Size: 1, Kind: store.FileData},
		}, []store.Batch{
			{Number: 0, Files: []string{"s3://bkt-a/t/metadata/m.avro"}, Sizes: []int64{5}, Kinds: []string{store.FileMetadata}},
			{Number: 1, Files: []string{"s3://bkt-b/t/data/1.parquet", "s3://bkt-b/t/data/2.parquet"}, Sizes: []int64{10, 20}, Kinds: []string{store.FileData, store.FileDeletes}},
		}},
		{"paths only", []store.ListedFile{{Path: "s3://bkt-a/x"}, {Path: "s3://bkt-a/w"}}, []store.Batch{
			{Number: 0, Files: []string{"s3://bkt-a/w", "s3://bkt-a/x"}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, n := fileBatches("j", tc.files)
			for i := range tc.want {
				tc.want[i].JobID = "j"
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) || n != countFiles(tc.want) {
				t.Fatalf("batches %+v (%d files)\nwant %+v", got, n, tc.want)
			}
		})
	}
	// The cut at MaxKeysPerCall keeps sizes with their files.
	var many []store.ListedFile
	for i := range MaxKeysPerCall + 5 {
		many = append(many, store.ListedFile{Path: fmt.Sprintf("s3://bkt-a/k%05d", i), Size: int64(i), Kind: store.FileData})
	}
	got, _ := fileBatches("j", many)
	if len(got) != 2 || len(got[1].Files) != 5 || got[1].Sizes[0] != MaxKeysPerCall || !slices.Equal(got[1].Files[:1], []string{fmt.Sprintf("s3://bkt-a/k%05d", MaxKeysPerCall)}) {
		t.Fatalf("cut: %d batches, second %v %v", len(got), got[len(got)-1].Files, got[len(got)-1].Sizes)
	}
}

func countFiles(bs []store.Batch) int {
	n := 0
	for _, b := range bs {
		n += len(b.Files)
	}
	return n
}
