package emulators

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

const s3ChildDir = "ICEHOLD_S3_CHILD_DIR"

// TestS3Child is the process TestS3Kill9 kills: it runs s3Step 0, 1, ...,
// compacting every few dozen records, and prints each acknowledged step.
func TestS3Child(t *testing.T) {
	dir := os.Getenv(s3ChildDir)
	if dir == "" {
		t.Skip("TestS3Kill9's child process")
	}
	s3CompactAt = 20
	s, err := OpenS3Store(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s3Step(s, 0); err != nil {
		t.Fatal(err)
	}
	for i := 1; ; i++ {
		if err := s3Step(s, i); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("ok %d\n", i)
	}
}

// s3Step is the child's step i, one store call (one journal append):
// step 0 creates the versioned bucket; then step i puts a new version of
// a/../k<i%7>, adds a delete marker on every third, and on every fourth
// deletes every version of the key for good (the journal turns to
// history, so it compacts).
func s3Step(s *S3Store, i int) error {
	key := fmt.Sprintf("a/../k%d", i%7)
	switch {
	case i == 0:
		if err := s.CreateBucket("bkt"); err != nil {
			return err
		}
		return s.SetVersioning("bkt", VersioningEnabled)
	case i%4 == 0:
		res, err := s.ListObjectVersions("bkt", ListVersionsOptions{Prefix: key, MaxKeys: 1000})
		if err != nil || len(res.Versions) == 0 {
			return err
		}
		var ids []ObjectID
		for _, v := range res.Versions {
			ids = append(ids, ObjectID{v.Key, v.VersionID})
		}
		_, err = s.DeleteObjects("bkt", ids)
		return err
	case i%3 == 0:
		_, err := s.DeleteObject("bkt", key, "")
		return err
	}
	_, err := s.PutObject("bkt", key, strings.NewReader(strconv.Itoa(i)), PutOptions{})
	return err
}

// s3Shape is what steps leave: each key's versions, newest first, as
// bodies ("-" for a delete marker).
func s3Shape(t *testing.T, s *S3Store) string {
	t.Helper()
	res, err := s.ListObjectVersions("bkt", ListVersionsOptions{MaxKeys: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, v := range res.Versions {
		body := "-"
		if !v.DeleteMarker {
			_, rc, err := s.GetObject("bkt", v.Key, v.VersionID)
			if err != nil {
				t.Fatalf("%s version %s: %v", v.Key, v.VersionID, err)
			}
			raw, _ := io.ReadAll(rc)
			rc.Close()
			body = string(raw)
		}
		fmt.Fprintf(&b, "%s:%s ", v.Key, body)
	}
	return b.String()
}

// A kill -9 while writing and compacting (wherever it lands) loses no
// acknowledged write: after a restart the bucket holds exactly the
// acknowledged steps, or one more (the one in flight), with their bodies,
// its keys literal.
func TestS3Kill9(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestS3Child$", "-test.count=1")
	cmd.Env = append(os.Environ(), s3ChildDir+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := 0
	lines := bufio.NewScanner(out)
	for acked < 150 && lines.Scan() {
		if n, ok := strings.CutPrefix(lines.Text(), "ok "); ok {
			acked, _ = strconv.Atoi(n)
		}
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	if acked < 150 {
		t.Fatalf("the child acknowledged %d steps", acked)
	}
	s, err := OpenS3Store(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := s3Shape(t, s)
	_ = s.Close()
	for _, n := range []int{acked, acked + 1} {
		want, err := OpenS3Store("")
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i <= n; i++ {
			if err := s3Step(want, i); err != nil {
				t.Fatal(err)
			}
		}
		if s3Shape(t, want) == got {
			return
		}
	}
	t.Errorf("after a kill -9 past %d acknowledged steps: %s", acked, got)
}

// Concurrent writers share fsyncs, never a journal line: after a restart
// every acknowledged version of every writer is there, in its order.
func TestS3ConcurrentWritersShareTheJournal(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenS3Store(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateBucket("bkt"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetVersioning("bkt", VersioningEnabled); err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 25
	errs := make(chan error, writers+1)
	done := make(chan struct{})
	go func() { // a lister meanwhile
		for {
			select {
			case <-done:
				errs <- nil
				return
			default:
				if _, err := s.ListObjectVersions("bkt", ListVersionsOptions{MaxKeys: 7}); err != nil {
					errs <- err
					return
				}
			}
		}
	}()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := s.PutObject("bkt", fmt.Sprintf("w%d", w), strings.NewReader(strconv.Itoa(i)), PutOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(done)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	want := s3Shape(t, s)
	_ = s.Close()
	if s, err = OpenS3Store(dir); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s3Shape(t, s); got != want {
		t.Errorf("after a restart:\n got %s\nwant %s", got, want)
	}
	for w := range writers {
		res, _ := s.ListObjectVersions("bkt", ListVersionsOptions{Prefix: fmt.Sprintf("w%d", w), MaxKeys: 1000})
		if len(res.Versions) != each {
			t.Errorf("w%d has %d versions, want %d", w, len(res.Versions), each)
		}
		for i, v := range res.Versions {
			_, rc, _ := s.GetObject("bkt", v.Key, v.VersionID)
			b, _ := io.ReadAll(rc)
			rc.Close()
			if string(b) != strconv.Itoa(each-1-i) {
				t.Errorf("w%d version %d holds %q, want %d (newest first)", w, i, b, each-1-i)
			}
		}
	}
}
