package emulators

import (
	"encoding/base64"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The embedded S3's operations over HTTP (path-style), each run by
// serveCall from the routing decision that also authorized it.

// writeXML answers 200 with an XML body.
func writeXML(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, xml.Header)
	_ = xml.NewEncoder(w).Encode(v)
}

// fail answers err: S3's error for an *S3Error, else InternalError. A HEAD
// answer has no body.
func fail(w http.ResponseWriter, r *http.Request, err error) {
	var e *S3Error
	if !errors.As(err, &e) {
		e = s3Err(http.StatusInternalServerError, "InternalError", err.Error())
	}
	if r.Method == http.MethodHead {
		w.WriteHeader(e.Status)
		return
	}
	writeS3Error(w, e.Status, e.Code, e.Message)
}

func invalidArgument(msg string) *S3Error {
	return s3Err(http.StatusBadRequest, "InvalidArgument", msg)
}

var errNotImplemented = s3Err(http.StatusNotImplemented, "NotImplemented", "A header you provided implies functionality that is not implemented")

// serveCall runs a call the caller is authorized for; denied tells which
// of DeleteObjects' keys it may not delete.
func (s *S3) serveCall(w http.ResponseWriter, r *http.Request, c s3Call, denied func(access) bool) {
	st := s.Store
	if c.hasVersion && c.versionID == "" {
		fail(w, r, invalidArgument("Version id cannot be the empty string"))
		return
	}
	switch c.op {
	case "ListBuckets":
		out := xmlListBuckets{Xmlns: s3NS, Owner: localOwner}
		for _, b := range st.Buckets() {
			out.Buckets = append(out.Buckets, xmlBucket{b.Name, s3Time(b.Created)})
		}
		writeXML(w, out)
	case "CreateBucket":
		if _, err := readBody(r); err != nil {
			fail(w, r, err)
			return
		}
		if err := st.CreateBucket(c.bucket); err != nil {
			fail(w, r, err)
			return
		}
		w.Header().Set("Location", "/"+c.bucket)
		w.WriteHeader(http.StatusOK)
	case "DeleteBucket":
		if err := st.DeleteBucket(c.bucket); err != nil {
			fail(w, r, err)
			return
		}
		_ = s.policies.remove(c.bucket)
		w.WriteHeader(http.StatusNoContent)
	case "HeadBucket":
		if !st.BucketExists(c.bucket) {
			fail(w, r, ErrNoSuchBucket)
			return
		}
		w.Header().Set("X-Amz-Bucket-Region", s.region())
		w.WriteHeader(http.StatusOK)
	case "GetBucketLocation":
		if !st.BucketExists(c.bucket) {
			fail(w, r, ErrNoSuchBucket)
			return
		}
		loc := s.region()
		if loc == "us-east-1" {
			loc = ""
		}
		writeXML(w, xmlLocation{Xmlns: s3NS, Location: loc})
	case "GetBucketVersioning":
		status, err := st.Versioning(c.bucket)
		if err != nil {
			fail(w, r, err)
			return
		}
		writeXML(w, xmlVersioning{Xmlns: s3NS, Status: status})
	case "PutBucketVersioning":
		s.putVersioning(w, r, c)
	case "GetBucketPolicy", "PutBucketPolicy", "DeleteBucketPolicy":
		s.servePolicy(w, r, c)
	case "ListObjects", "ListObjectsV2":
		s.listObjects(w, r, c)
	case "ListObjectVersions":
		s.listVersions(w, r, c)
	case "DeleteObjects":
		s.deleteObjects(w, r, c, denied)
	case "ListMultipartUploads":
		s.listUploads(w, r, c)
	case "GetObject", "HeadObject":
		s.getObject(w, r, c)
	case "PutObject":
		s.putObject(w, r, c)
	case "CopyObject":
		s.copyObject(w, r, c)
	case "DeleteObject":
		res, err := st.DeleteObject(c.bucket, c.key, c.versionID)
		if err != nil {
			fail(w, r, err)
			return
		}
		if res.DeleteMarker {
			w.Header().Set("X-Amz-Delete-Marker", "true")
		}
		if res.MarkerAdded || c.versionID != "" {
			w.Header().Set("X-Amz-Version-Id", res.VersionID)
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		s.serveMultipart(w, r, c)
	}
}

func (s *S3) region() string {
	if m := s.iam.Load(); m != nil && m.Region != "" {
		return m.Region
	}
	return "us-east-1"
}

func (s *S3) putVersioning(w http.ResponseWriter, r *http.Request, c s3Call) {
	body, err := readBody(r)
	if err != nil {
		fail(w, r, err)
		return
	}
	var v xmlVersioning
	if err := xml.Unmarshal(body, &v); err != nil {
		fail(w, r, ErrMalformedXML)
		return
	}
	if v.MfaDelete == "Enabled" {
		fail(w, r, errNotImplemented)
		return
	}
	if err := s.Store.SetVersioning(c.bucket, v.Status); err != nil {
		fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// maxKeys parses a max-keys style parameter: 1,000 when absent, at most
// 1,000.
func maxKeys(q url.Values, name string) (int, error) {
	v, ok := q[name]
	if !ok {
		return 1000, nil
	}
	n, err := strconv.Atoi(v[0])
	if err != nil || n < 0 {
		return 0, invalidArgument("Provided " + name + " not an integer or within integer range")
	}
	return min(n, 1000), nil
}

// encoder url-encodes the names of a listing when encoding-type=url.
func encoder(q url.Values) (func(string) string, string, error) {
	switch q.Get("encoding-type") {
	case "":
		return func(s string) string { return s }, "", nil
	case "url":
		return func(s string) string { return strings.ReplaceAll(url.QueryEscape(s), "%2F", "/") }, "url", nil
	}
	return nil, "", invalidArgument("Invalid Encoding Method specified in Request")
}

func (s *S3) listObjects(w http.ResponseWriter, r *http.Request, c s3Call) {
	q := c.query
	max, err := maxKeys(q, "max-keys")
	if err != nil {
		fail(w, r, err)
		return
	}
	enc, encType, err := encoder(q)
	if err != nil {
		fail(w, r, err)
		return
	}
	o := ListOptions{Prefix: q.Get("prefix"), Delimiter: q.Get("delimiter"), MaxKeys: max}
	out := xmlListBucket{Xmlns: s3NS, Name: c.bucket, Prefix: enc(o.Prefix), MaxKeys: max, Delimiter: enc(o.Delimiter), EncodingType: encType}
	v2 := c.op == "ListObjectsV2"
	if v2 {
		o.After = q.Get("start-after")
		out.StartAfter = enc(o.After)
		if tok, ok := q["continuation-token"]; ok {
			raw, err := base64.RawURLEncoding.DecodeString(tok[0])
			if err != nil || tok[0] == "" {
				fail(w, r, invalidArgument("The continuation token provided is incorrect"))
				return
			}
			o.After, out.ContinuationToken = string(raw), tok[0]
		}
	} else {
		o.After = q.Get("marker")
		m := enc(o.After)
		out.Marker = &m
	}
	res, err := s.Store.ListObjects(c.bucket, o)
	if err != nil {
		fail(w, r, err)
		return
	}
	for _, v := range res.Objects {
		x := xmlContents{Key: enc(v.Key), LastModified: s3Time(v.LastModified), ETag: v.ETag, Size: v.Size, StorageClass: "STANDARD"}
		if !v2 || q.Get("fetch-owner") == "true" {
			x.Owner = &localOwner
		}
		out.Contents = append(out.Contents, x)
	}
	for _, p := range res.CommonPrefixes {
		out.CommonPrefixes = append(out.CommonPrefixes, xmlPrefix{enc(p)})
	}
	out.IsTruncated = res.IsTruncated
	if v2 {
		n := len(res.Objects) + len(res.CommonPrefixes)
		out.KeyCount = &n
		if res.IsTruncated {
			out.NextContinuationToken = base64.RawURLEncoding.EncodeToString([]byte(res.Last))
		}
	} else if res.IsTruncated && o.Delimiter != "" {
		out.NextMarker = enc(res.Last)
	}
	writeXML(w, out)
}

func (s *S3) listVersions(w http.ResponseWriter, r *http.Request, c s3Call) {
	q := c.query
	max, err := maxKeys(q, "max-keys")
	if err != nil {
		fail(w, r, err)
		return
	}
	enc, encType, err := encoder(q)
	if err != nil {
		fail(w, r, err)
		return
	}
	o := ListVersionsOptions{Prefix: q.Get("prefix"), Delimiter: q.Get("delimiter"), KeyMarker: q.Get("key-marker"),
		VersionIDMarker: q.Get("version-id-marker"), MaxKeys: max}
	if _, ok := q["version-id-marker"]; ok {
		if o.VersionIDMarker == "" {
			fail(w, r, invalidArgument("A version-id marker cannot be empty."))
			return
		}
		if o.KeyMarker == "" {
			fail(w, r, invalidArgument("A version-id marker cannot be specified without a key marker."))
			return
		}
	}
	res, err := s.Store.ListObjectVersions(c.bucket, o)
	if err != nil {
		fail(w, r, err)
		return
	}
	out := xmlListVersions{Xmlns: s3NS, Name: c.bucket, Prefix: enc(o.Prefix), KeyMarker: enc(o.KeyMarker), VersionIDMarker: o.VersionIDMarker,
		MaxKeys: max, Delimiter: enc(o.Delimiter), EncodingType: encType, IsTruncated: res.IsTruncated,
		NextKeyMarker: enc(res.NextKeyMarker), NextVersionIDMarker: res.NextVersionIDMarker}
	for _, v := range res.Versions {
		x := xmlVersion{XMLName: xml.Name{Local: "Version"}, Key: enc(v.Key), VersionID: v.VersionID, IsLatest: v.IsLatest,
			LastModified: s3Time(v.LastModified), Owner: localOwner}
		if v.DeleteMarker {
			x.XMLName.Local = "DeleteMarker"
		} else {
			size := v.Size
			x.ETag, x.Size, x.StorageClass = v.ETag, &size, "STANDARD"
		}
		out.Entries = append(out.Entries, x)
	}
	for _, p := range res.CommonPrefixes {
		out.CommonPrefixes = append(out.CommonPrefixes, xmlPrefix{enc(p)})
	}
	writeXML(w, out)
}

// requireDigest: S3 takes a DeleteObjects body only with its Content-MD5
// or a checksum.
func requireDigest(r *http.Request) error {
	if r.Header.Get("Content-Md5") != "" || r.Header.Get("X-Amz-Sdk-Checksum-Algorithm") != "" || r.Header.Get("X-Amz-Trailer") != "" {
		return nil
	}
	for alg := range checksums {
		if r.Header.Get("X-Amz-Checksum-"+alg) != "" {
			return nil
		}
	}
	return s3Err(http.StatusBadRequest, "InvalidRequest", "Missing required header for this request: Content-MD5")
}

func (s *S3) deleteObjects(w http.ResponseWriter, r *http.Request, c s3Call, denied func(access) bool) {
	if err := requireDigest(r); err != nil {
		fail(w, r, err)
		return
	}
	body, err := readBody(r)
	if err != nil {
		fail(w, r, err)
		return
	}
	var in xmlDeleteRequest
	if err := xml.Unmarshal(body, &in); err != nil || len(in.Objects) == 0 || len(in.Objects) > 1000 {
		fail(w, r, ErrMalformedXML)
		return
	}
	if !s.Store.BucketExists(c.bucket) {
		fail(w, r, ErrNoSuchBucket)
		return
	}
	out := xmlDeleteResult{Xmlns: s3NS}
	var ids []ObjectID
	kf := s.keyFault.Load()
	for _, o := range in.Objects {
		action := "s3:DeleteObject"
		if o.VersionID != "" {
			action = "s3:DeleteObjectVersion"
		}
		switch {
		case checkKey(o.Key) != nil:
			out.Errors = append(out.Errors, xmlDeleteError{Key: o.Key, VersionID: o.VersionID, Code: "InvalidArgument", Message: "Invalid key"})
		case denied(access{action: action, resource: "arn:aws:s3:::" + c.bucket + "/" + o.Key}):
			out.Errors = append(out.Errors, xmlDeleteError{Key: o.Key, VersionID: o.VersionID, Code: "AccessDenied", Message: "Access Denied"})
		case kf != nil && kf.Match(o.Key):
			out.Errors = append(out.Errors, xmlDeleteError{Key: o.Key, VersionID: o.VersionID, Code: kf.Code, Message: "injected fault"})
		default:
			ids = append(ids, ObjectID{o.Key, o.VersionID})
		}
	}
	if len(ids) > 0 {
		res, err := s.Store.DeleteObjects(c.bucket, ids)
		if err != nil {
			fail(w, r, err)
			return
		}
		if !in.Quiet {
			for _, d := range res {
				x := xmlDeleted{Key: d.Key}
				if !d.MarkerAdded {
					x.VersionID = d.VersionID
				}
				if d.DeleteMarker {
					x.DeleteMarker, x.DeleteMarkerVersionID = true, d.VersionID
				}
				out.Deleted = append(out.Deleted, x)
			}
		}
	}
	writeXML(w, out)
}

// objectHeaders writes a version's stored metadata and identity headers.
func objectHeaders(w http.ResponseWriter, v ObjectVersion) {
	h := w.Header()
	for k, val := range v.Metadata {
		h.Set(k, val)
	}
	h.Set("ETag", v.ETag)
	h.Set("Last-Modified", v.LastModified.UTC().Format(http.TimeFormat))
	h.Set("Accept-Ranges", "bytes")
	if v.VersionID != NullVersion {
		h.Set("X-Amz-Version-Id", v.VersionID)
	}
}

// deleteMarkerHeaders: a GET or HEAD that found a delete marker says so.
func deleteMarkerHeaders(w http.ResponseWriter, v ObjectVersion) {
	if !v.DeleteMarker {
		return
	}
	w.Header().Set("X-Amz-Delete-Marker", "true")
	w.Header().Set("Last-Modified", v.LastModified.UTC().Format(http.TimeFormat))
	if v.VersionID != NullVersion {
		w.Header().Set("X-Amz-Version-Id", v.VersionID)
	}
}

func (s *S3) getObject(w http.ResponseWriter, r *http.Request, c s3Call) {
	var v ObjectVersion
	var body io.ReadSeekCloser
	var err error
	if r.Method == http.MethodHead {
		v, err = s.Store.HeadObject(c.bucket, c.key, c.versionID)
	} else {
		v, body, err = s.Store.GetObject(c.bucket, c.key, c.versionID)
	}
	if err != nil {
		deleteMarkerHeaders(w, v)
		fail(w, r, err)
		return
	}
	if body != nil {
		defer body.Close()
	}
	if status := preconditions(r, v); status != 0 {
		if status == http.StatusNotModified {
			w.Header().Set("ETag", v.ETag)
			w.Header().Set("Last-Modified", v.LastModified.UTC().Format(http.TimeFormat))
			w.WriteHeader(status)
			return
		}
		fail(w, r, ErrPreconditionFailed)
		return
	}
	objectHeaders(w, v)
	start, length, partial, err := byteRange(r.Header.Get("Range"), v.Size)
	if err != nil {
		w.Header().Set("Content-Range", "bytes */"+strconv.FormatInt(v.Size, 10))
		fail(w, r, err)
		return
	}
	w.Header().Set("Content-Length", strconv.FormatInt(length, 10))
	status := http.StatusOK
	if partial {
		w.Header().Set("Content-Range", "bytes "+strconv.FormatInt(start, 10)+"-"+strconv.FormatInt(start+length-1, 10)+"/"+strconv.FormatInt(v.Size, 10))
		status = http.StatusPartialContent
	}
	w.WriteHeader(status)
	if body == nil {
		return
	}
	if _, err := body.Seek(start, io.SeekStart); err != nil {
		return
	}
	_, _ = io.CopyN(w, body, length)
}

// preconditions evaluates a GET's conditional headers as S3 does: 412 or
// 304, 0 to answer.
func preconditions(r *http.Request, v ObjectVersion) int {
	etagMatch := func(h string) bool {
		for _, e := range strings.Split(h, ",") {
			if e = strings.TrimSpace(e); e == "*" || strings.Trim(e, `"`) == strings.Trim(v.ETag, `"`) {
				return true
			}
		}
		return false
	}
	date := func(h string) (time.Time, bool) {
		t, err := http.ParseTime(h)
		return t, err == nil
	}
	mod := v.LastModified.Truncate(time.Second)
	ifMatch, ifNone := r.Header.Get("If-Match"), r.Header.Get("If-None-Match")
	switch {
	case ifMatch != "" && !etagMatch(ifMatch):
		return http.StatusPreconditionFailed
	case ifMatch == "":
		if t, ok := date(r.Header.Get("If-Unmodified-Since")); ok && mod.After(t) {
			return http.StatusPreconditionFailed
		}
	}
	switch {
	case ifNone != "" && etagMatch(ifNone):
		return http.StatusNotModified
	case ifNone == "":
		if t, ok := date(r.Header.Get("If-Modified-Since")); ok && !mod.After(t) {
			return http.StatusNotModified
		}
	}
	return 0
}

var errInvalidRange = s3Err(http.StatusRequestedRangeNotSatisfiable, "InvalidRange", "The requested range is not satisfiable")

// byteRange is a Range header's one range (S3 serves one; a header it
// cannot parse is ignored and the whole object served).
func byteRange(h string, size int64) (start, length int64, partial bool, err error) {
	spec, ok := strings.CutPrefix(strings.TrimSpace(h), "bytes=")
	if !ok || strings.Contains(spec, ",") {
		return 0, size, false, nil
	}
	first, last, ok := strings.Cut(spec, "-")
	if !ok {
		return 0, size, false, nil
	}
	if first == "" {
		n, err := strconv.ParseInt(last, 10, 64)
		if err != nil || n < 0 {
			return 0, size, false, nil
		}
		if n == 0 || size == 0 {
			return 0, 0, false, errInvalidRange
		}
		n = min(n, size)
		return size - n, n, true, nil
	}
	a, err := strconv.ParseInt(first, 10, 64)
	if err != nil || a < 0 {
		return 0, size, false, nil
	}
	b := size - 1
	if last != "" {
		if b, err = strconv.ParseInt(last, 10, 64); err != nil || b < a {
			return 0, size, false, nil
		}
		b = min(b, size-1)
	}
	if a >= size {
		return 0, 0, false, errInvalidRange
	}
	return a, b - a + 1, true, nil
}

// putOptions are a write's metadata and conditions; If-None-Match takes
// only "*" (S3: 501 for an ETag).
func putOptions(r *http.Request, meta map[string]string) (PutOptions, error) {
	o := PutOptions{Metadata: meta, IfNoneMatch: r.Header.Get("If-None-Match"), IfMatch: r.Header.Get("If-Match")}
	if o.IfNoneMatch != "" && o.IfNoneMatch != "*" {
		return o, errNotImplemented
	}
	return o, nil
}

// objectBody is a write's content; S3 needs its length up front.
func objectBody(r *http.Request) (io.Reader, error) {
	if r.ContentLength < 0 && r.Header.Get("X-Amz-Decoded-Content-Length") == "" {
		return nil, errMissingLength
	}
	return payload(r)
}

func (s *S3) putObject(w http.ResponseWriter, r *http.Request, c s3Call) {
	o, err := putOptions(r, metadataOf(r.Header))
	if err != nil {
		fail(w, r, err)
		return
	}
	body, err := objectBody(r)
	if err != nil {
		fail(w, r, err)
		return
	}
	v, err := s.Store.PutObject(c.bucket, c.key, body, o)
	if err != nil {
		fail(w, r, err)
		return
	}
	w.Header().Set("ETag", v.ETag)
	if v.VersionID != NullVersion {
		w.Header().Set("X-Amz-Version-Id", v.VersionID)
	}
	w.WriteHeader(http.StatusOK)
}

func (s *S3) copyObject(w http.ResponseWriter, r *http.Request, c s3Call) {
	src, ver, ok := copySource(r)
	if !ok {
		fail(w, r, invalidArgument("Copy Source must mention the source bucket and key: sourcebucket/sourcekey"))
		return
	}
	srcBucket, srcKey, _ := strings.Cut(src, "/")
	replace := strings.EqualFold(r.Header.Get("X-Amz-Metadata-Directive"), "REPLACE")
	if srcBucket == c.bucket && srcKey == c.key && ver == "" && !replace {
		fail(w, r, s3Err(http.StatusBadRequest, "InvalidRequest", "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes."))
		return
	}
	v, body, err := s.Store.GetObject(srcBucket, srcKey, ver)
	if err != nil {
		if errors.Is(err, ErrDeleteMarker) {
			err = invalidArgument("The source of a copy request may not specifically refer to a delete marker by version id.")
		}
		fail(w, r, err)
		return
	}
	defer body.Close()
	meta := v.Metadata
	if replace {
		meta = metadataOf(r.Header)
	}
	o, err := putOptions(r, meta)
	if err != nil {
		fail(w, r, err)
		return
	}
	out, err := s.Store.PutObject(c.bucket, c.key, body, o)
	if err != nil {
		fail(w, r, err)
		return
	}
	if v.VersionID != NullVersion {
		w.Header().Set("X-Amz-Copy-Source-Version-Id", v.VersionID)
	}
	if out.VersionID != NullVersion {
		w.Header().Set("X-Amz-Version-Id", out.VersionID)
	}
	writeXML(w, xmlCopyResult{Xmlns: s3NS, LastModified: s3Time(out.LastModified), ETag: out.ETag})
}

func (s *S3) serveMultipart(w http.ResponseWriter, r *http.Request, c s3Call) {
	st := s.Store
	switch c.op {
	case "CreateMultipartUpload":
		if _, ok := c.query["versionId"]; ok {
			fail(w, r, invalidArgument("This operation does not accept a version-id."))
			return
		}
		o, err := putOptions(r, metadataOf(r.Header))
		if err != nil {
			fail(w, r, err)
			return
		}
		id, err := st.CreateMultipartUpload(c.bucket, c.key, o.Metadata)
		if err != nil {
			fail(w, r, err)
			return
		}
		writeXML(w, xmlInitiateUpload{Xmlns: s3NS, Bucket: c.bucket, Key: c.key, UploadID: id})
	case "UploadPart":
		if r.Header.Get("X-Amz-Copy-Source") != "" {
			fail(w, r, errNotImplemented) // UploadPartCopy
			return
		}
		n, err := strconv.Atoi(c.query.Get("partNumber"))
		if err != nil || n < 1 || n > 10000 {
			fail(w, r, invalidArgument("Part number must be an integer between 1 and 10000, inclusive"))
			return
		}
		body, err := objectBody(r)
		if err != nil {
			fail(w, r, err)
			return
		}
		etag, err := st.UploadPart(c.bucket, c.key, c.uploadID, n, body)
		if err != nil {
			fail(w, r, err)
			return
		}
		w.Header().Set("ETag", etag)
		w.WriteHeader(http.StatusOK)
	case "CompleteMultipartUpload":
		o, err := putOptions(r, nil)
		if err != nil {
			fail(w, r, err)
			return
		}
		body, err := readBody(r)
		if err != nil {
			fail(w, r, err)
			return
		}
		var in xmlCompleteRequest
		_ = xml.Unmarshal(body, &in) // no parts: MalformedXML, once the upload is known
		parts := make([]CompletedPart, len(in.Parts))
		for i, p := range in.Parts {
			parts[i] = CompletedPart{p.PartNumber, p.ETag}
		}
		v, err := st.CompleteMultipartUpload(c.bucket, c.key, c.uploadID, parts, o)
		if err != nil {
			fail(w, r, err)
			return
		}
		if v.VersionID != NullVersion {
			w.Header().Set("X-Amz-Version-Id", v.VersionID)
		}
		writeXML(w, xmlCompleteResult{Xmlns: s3NS, Location: "/" + c.bucket + "/" + c.key, Bucket: c.bucket, Key: c.key, ETag: v.ETag})
	case "AbortMultipartUpload":
		if err := st.AbortMultipartUpload(c.bucket, c.key, c.uploadID); err != nil {
			fail(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case "ListParts":
		max, err := maxKeys(c.query, "max-parts")
		if err != nil {
			fail(w, r, err)
			return
		}
		marker, _ := strconv.Atoi(c.query.Get("part-number-marker"))
		parts, truncated, err := st.ListParts(c.bucket, c.key, c.uploadID, marker, max)
		if err != nil {
			fail(w, r, err)
			return
		}
		out := xmlListParts{Xmlns: s3NS, Bucket: c.bucket, Key: c.key, UploadID: c.uploadID, PartNumberMarker: marker,
			MaxParts: max, IsTruncated: truncated, StorageClass: "STANDARD"}
		for _, p := range parts {
			out.Parts = append(out.Parts, xmlPart{p.PartNumber, s3Time(p.LastModified), p.ETag, p.Size})
			out.NextPartNumberMarker = p.PartNumber
		}
		writeXML(w, out)
	}
}

func (s *S3) listUploads(w http.ResponseWriter, r *http.Request, c s3Call) {
	q := c.query
	max, err := maxKeys(q, "max-uploads")
	if err != nil {
		fail(w, r, err)
		return
	}
	ups, truncated, err := s.Store.ListMultipartUploads(c.bucket, q.Get("prefix"), q.Get("key-marker"), q.Get("upload-id-marker"), max)
	if err != nil {
		fail(w, r, err)
		return
	}
	out := xmlListUploads{Xmlns: s3NS, Bucket: c.bucket, KeyMarker: q.Get("key-marker"), UploadIDMarker: q.Get("upload-id-marker"),
		Prefix: q.Get("prefix"), MaxUploads: max, IsTruncated: truncated}
	for _, u := range ups {
		out.Uploads = append(out.Uploads, xmlUpload{u.Key, u.UploadID, s3Time(u.Initiated), "STANDARD"})
		if truncated {
			out.NextKeyMarker, out.NextUploadIDMarker = u.Key, u.UploadID
		}
	}
	writeXML(w, out)
}
