package localaws

import (
	"fmt"
	"net/http"
	"path/filepath"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3afero"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/spf13/afero"
)

// S3 is gofakes3 on disk (dir set) or in memory (dir == ""). Serve it over
// plain HTTP: over HTTPS the SDK sends aws-chunked bodies gofakes3 would store
// verbatim.
type S3 struct {
	http.Handler
	Backend gofakes3.Backend
}

// NewS3 returns the emulator with the named buckets created.
func NewS3(dir string, buckets ...string) (*S3, error) {
	var backend gofakes3.Backend
	if dir == "" {
		backend = s3mem.New()
	} else {
		fs, err := s3afero.NewBasePathFs(afero.NewOsFs(), filepath.Join(dir, "s3"), s3afero.FsPathCreateAll)
		if err != nil {
			return nil, err
		}
		mb, err := s3afero.MultiBucket(fs)
		if err != nil {
			return nil, err
		}
		backend = mb
	}
	for _, b := range buckets {
		exists, err := backend.BucketExists(b)
		if err != nil {
			return nil, err
		}
		if !exists {
			if err := backend.CreateBucket(b); err != nil {
				return nil, fmt.Errorf("create bucket %s: %w", b, err)
			}
		}
	}
	faker := gofakes3.New(backend, gofakes3.WithAutoBucket(true))
	return &S3{Handler: faker.Server(), Backend: backend}, nil
}
