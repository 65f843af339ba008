package catalog

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"sync"

	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/icehold/icehold/shared/credentials"
	"github.com/icehold/icehold/shared/objects"
	"github.com/icehold/icehold/shared/store"
)

// ErrBadMetadata: a metadata file that cannot be read as Iceberg metadata.
var ErrBadMetadata = errors.New("unreadable table metadata")

func jsonOf(meta table.Metadata) ([]byte, error) {
	raw, err := json.Marshal(meta)
	if err != nil {
		return nil, fmt.Errorf("encode metadata: %w", err)
	}
	return raw, nil
}

// Bounds on metadata reads, well inside the 1 GB the catalog and pipeline
// functions have: a metadata file as stored (gzip or not), the JSON it
// inflates to, and all metadata one request reads (a 50-table transaction).
// Parsed metadata takes a few times its JSON size in memory.
const (
	MaxMetadataFileBytes = 64 << 20
	MaxMetadataJSONBytes = 128 << 20
	MaxRequestReadBytes  = 192 << 20
)

// ErrTooLarge: metadata beyond what one request may read.
var ErrTooLarge = errors.New("metadata too large")

type budgetKey struct{}

// readBudget is what a request may still read of metadata.
type readBudget struct {
	mu   sync.Mutex
	left int64
}

// WithReadBudget bounds all metadata one request reads (a multi-table
// commit stages a metadata file per table in memory).
func WithReadBudget(ctx context.Context, n int64) context.Context {
	return context.WithValue(ctx, budgetKey{}, &readBudget{left: n})
}

func spend(ctx context.Context, loc string, n int) error {
	b, ok := ctx.Value(budgetKey{}).(*readBudget)
	if !ok {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if int64(n) > b.left {
		return fmt.Errorf("%w: reading %s passes the %d MiB of metadata one request may read", ErrTooLarge, loc, MaxRequestReadBytes>>20)
	}
	b.left -= int64(n)
	return nil
}

// ReadMetadata reads and parses a metadata file.
func (s *Service) ReadMetadata(ctx context.Context, loc string) (table.Metadata, error) {
	meta, _, err := s.readMetadata(ctx, loc)
	return meta, err
}

// checkMetadataName refuses a register of a file whose name is not a
// metadata file's (credentials.MetadataSuffixes): engines may not write
// those names (vended sessions, the engine policy), so an engine can make
// no file icehold registers as metadata.
func checkMetadataName(loc string) error {
	if !credentials.IsMetadataName(loc) {
		return fmt.Errorf("%w: metadata-location %s: a metadata file's name ends in %s", ErrBadRequest, loc, strings.Join(credentials.MetadataSuffixes, " or "))
	}
	return nil
}

// readMetadata reads and parses a metadata file (plain or gzip-compressed),
// returning the parsed metadata and the JSON as stored.
func (s *Service) readMetadata(ctx context.Context, loc string) (table.Metadata, []byte, error) {
	raw, err := s.readMetadataFile(ctx, loc)
	if err != nil {
		return nil, nil, err
	}
	meta, err := table.ParseMetadataBytes(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %v", ErrBadMetadata, loc, err)
	}
	return meta, raw, nil
}

// readMetadataFile reads a metadata file's JSON (a table's or a view's),
// inflating a gzip-compressed one, within the request's read budget.
func (s *Service) readMetadataFile(ctx context.Context, loc string) ([]byte, error) {
	raw, err := s.objects.Get(ctx, loc, MaxMetadataFileBytes)
	if errors.Is(err, objects.ErrTooLarge) {
		return nil, fmt.Errorf("%w: %v", ErrTooLarge, err)
	}
	if err != nil {
		return nil, err
	}
	if len(raw) > 2 && raw[0] == 0x1f && raw[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrBadMetadata, loc, err)
		}
		if raw, err = io.ReadAll(io.LimitReader(zr, MaxMetadataJSONBytes+1)); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrBadMetadata, loc, err)
		}
		if len(raw) > MaxMetadataJSONBytes {
			return nil, fmt.Errorf("%w: %s inflates to more than %d MiB", ErrTooLarge, loc, MaxMetadataJSONBytes>>20)
		}
	}
	if err := spend(ctx, loc, len(raw)); err != nil {
		return nil, err
	}
	return raw, nil
}

// writeMetadata writes a new metadata file next to the table's others and
// returns its location and JSON. Files are never overwritten. The file is
// named in the request's intent before it is written: if the request never
// makes it current, the orphan sweep deletes it.
func (s *Service) writeMetadata(ctx context.Context, meta table.Metadata, previous string, in *store.Intent) (string, []byte, error) {
	raw, err := jsonOf(meta)
	if err != nil {
		return "", nil, err
	}
	return s.writeMetadataFile(ctx, meta.Location(), raw, previous, in)
}

// writeMetadataFile writes the metadata JSON of a table or view at
// location as writeMetadata says.
func (s *Service) writeMetadataFile(ctx context.Context, location string, raw []byte, previous string, in *store.Intent) (string, []byte, error) {
	if err := spend(ctx, location, len(raw)); err != nil {
		return "", nil, err
	}
	loc := fmt.Sprintf("%s/metadata/%05d-%s.metadata.json",
		strings.TrimRight(location, "/"), nextVersion(previous), uuid.NewString())
	in.Files = append(in.Files, loc)
	if err := s.store.PutIntent(ctx, *in); err != nil {
		return "", nil, err
	}
	if err := s.objects.PutNew(ctx, loc, raw, "application/json"); err != nil {
		if errors.Is(err, objects.ErrBadURI) {
			return "", nil, fmt.Errorf("%w: location %q: %v", ErrBadRequest, location, err)
		}
		return "", nil, err
	}
	return loc, raw, nil
}

// newIntent starts the pending-write record of one request's metadata files.
func (s *Service) newIntent(cat string) *store.Intent {
	return &store.Intent{ID: uuid.NewString(), Catalog: cat, Created: s.now().UnixNano()}
}

// nextVersion derives the next metadata version from the current file name
// (00003-<uuid>.metadata.json → 4), as Iceberg's own catalogs do.
func nextVersion(previous string) int {
	if previous == "" {
		return 0
	}
	base := path.Base(previous)
	if i := strings.IndexByte(base, '-'); i > 0 {
		if n, err := strconv.Atoi(base[:i]); err == nil {
			return n + 1
		}
	}
	return 1
}

// refsOnly keeps in a metadata JSON only the snapshots that a branch or tag
// points at (the REST spec's snapshots=refs), leaving everything else as is.
func refsOnly(raw []byte) ([]byte, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	var refs map[string]struct {
		SnapshotID int64 `json:"snapshot-id"`
	}
	if r, ok := doc["refs"]; ok {
		if err := json.Unmarshal(r, &refs); err != nil {
			return nil, err
		}
	}
	keep := map[int64]bool{}
	for _, r := range refs {
		keep[r.SnapshotID] = true
	}
	var snaps []json.RawMessage
	if sn, ok := doc["snapshots"]; ok {
		if err := json.Unmarshal(sn, &snaps); err != nil {
			return nil, err
		}
	}
	kept := make([]json.RawMessage, 0, len(keep))
	for _, sn := range snaps {
		var id struct {
			SnapshotID int64 `json:"snapshot-id"`
		}
		if err := json.Unmarshal(sn, &id); err != nil {
			return nil, err
		}
		if keep[id.SnapshotID] {
			kept = append(kept, sn)
		}
	}
	if doc["snapshots"], _ = json.Marshal(kept); doc["snapshots"] == nil {
		return nil, errors.New("encode snapshots")
	}
	return json.Marshal(doc)
}
