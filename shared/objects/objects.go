// Package objects reads and writes whole objects (metadata files) in S3 by
// their s3:// URI.
package objects

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// S3 lists the SDK calls this package makes; *s3.Client satisfies it.
type S3 interface {
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
}

var (
	// ErrNotFound: no object at that URI.
	ErrNotFound = errors.New("object not found")
	// ErrExists: an object is already at that URI.
	ErrExists = errors.New("object exists")
	// ErrBadURI: not an s3:// URI with a bucket and a key.
	ErrBadURI = errors.New("not an s3 uri")
	// ErrTooLarge: the object is larger than the reader's limit.
	ErrTooLarge = errors.New("object too large")
)

// Store reads and writes objects.
type Store struct{ s3 S3 }

// New returns a Store over an S3 client.
func New(c S3) *Store { return &Store{s3: c} }

// Split parses the URI of one object (see Parse): its bucket and exact key.
func Split(uri string) (bucket, key string, err error) {
	l, err := Parse(uri)
	if err != nil {
		return "", "", err
	}
	if l.Key == "" || strings.HasSuffix(l.Key, "/") {
		return "", "", fmt.Errorf("%w: %q names no object", ErrBadURI, uri)
	}
	return l.Bucket, l.Key, nil
}

// Get reads a whole object of at most limit bytes: a larger one is
// ErrTooLarge, refused from its Content-Length before any byte is read (and
// the read stops at limit+1 bytes whatever the header says), so a
// multi-gigabyte object named by mistake never fills a function's memory.
func (s *Store) Get(ctx context.Context, uri string, limit int64) ([]byte, error) {
	bucket, k, err := Split(uri)
	if err != nil {
		return nil, err
	}
	out, err := s.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(k)})
	if err != nil {
		if IsNotFound(err) {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, uri)
		}
		return nil, fmt.Errorf("get %s: %w", uri, err)
	}
	defer out.Body.Close()
	if n := aws.ToInt64(out.ContentLength); n > limit {
		return nil, fmt.Errorf("%w: %s is %d bytes, more than %d", ErrTooLarge, uri, n, limit)
	}
	b, err := io.ReadAll(io.LimitReader(out.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", uri, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: %s is more than %d bytes", ErrTooLarge, uri, limit)
	}
	return b, nil
}

// PutNew writes an object that must not exist yet (If-None-Match: *), so a
// metadata file is never overwritten.
func (s *Store) PutNew(ctx context.Context, uri string, data []byte, contentType string) error {
	bucket, k, err := Split(uri)
	if err != nil {
		return err
	}
	_, err = s.s3.PutObject(ctx, &s3.PutObjectInput{
		Bucket:      aws.String(bucket),
		Key:         aws.String(k),
		Body:        bytes.NewReader(data),
		ContentType: aws.String(contentType),
		IfNoneMatch: aws.String("*"),
	})
	var ae smithy.APIError
	if errors.As(err, &ae) && (ae.ErrorCode() == "PreconditionFailed" || ae.ErrorCode() == "ConditionalRequestConflict") {
		return fmt.Errorf("%w: %s", ErrExists, uri)
	}
	if err != nil {
		return fmt.Errorf("put %s: %w", uri, err)
	}
	return nil
}

// IsNotFound reports whether an S3 error says the object (or its bucket) is not there.
func IsNotFound(err error) bool {
	var nsk *s3types.NoSuchKey
	var nf *s3types.NotFound
	var nb *s3types.NoSuchBucket
	return errors.As(err, &nsk) || errors.As(err, &nf) || errors.As(err, &nb)
}
