package emulators

import (
	"net/http"
	"net/url"
	"strings"
)

// s3Call is what a request is: the S3 operation the handler runs and, from
// the same decision, the IAM actions that authorize it (one routing, so
// that what is authorized is what runs).
type s3Call struct {
	op          string // the S3 API operation (PutObject, ListObjectVersions, ...)
	bucket, key string
	query       url.Values
	// versionID: the versionId parameter (hasVersion: present, even empty).
	versionID  string
	hasVersion bool
	uploadID   string
	// action: the IAM action of a subresource's operation ("": s3:<op>,
	// or decided by accesses).
	action string
}

// subOp is a subresource's operation and the IAM action that authorizes
// it ("": s3:<op>).
type subOp struct{ op, action string }

type subresource struct {
	name string
	ops  map[string]subOp // by method
}

// bucketSubresources, in the order they are matched (a request naming two
// is routed by the first).
var bucketSubresources = []subresource{
	{"delete", map[string]subOp{"POST": {"DeleteObjects", ""}}},
	{"versions", map[string]subOp{"GET": {"ListObjectVersions", "s3:ListBucketVersions"}}},
	{"versioning", map[string]subOp{"GET": {"GetBucketVersioning", ""}, "PUT": {"PutBucketVersioning", ""}}},
	{"policy", map[string]subOp{"GET": {"GetBucketPolicy", ""}, "PUT": {"PutBucketPolicy", ""}, "DELETE": {"DeleteBucketPolicy", ""}}},
	{"location", map[string]subOp{"GET": {"GetBucketLocation", ""}}},
	{"uploads", map[string]subOp{"GET": {"ListMultipartUploads", "s3:ListBucketMultipartUploads"}}},
	{"lifecycle", map[string]subOp{"GET": {"GetBucketLifecycleConfiguration", "s3:GetLifecycleConfiguration"},
		"PUT": {"PutBucketLifecycleConfiguration", "s3:PutLifecycleConfiguration"}, "DELETE": {"DeleteBucketLifecycle", "s3:PutLifecycleConfiguration"}}},
	{"acl", map[string]subOp{"GET": {"GetBucketAcl", ""}, "PUT": {"PutBucketAcl", ""}}},
	{"tagging", map[string]subOp{"GET": {"GetBucketTagging", ""}, "PUT": {"PutBucketTagging", ""}, "DELETE": {"DeleteBucketTagging", "s3:PutBucketTagging"}}},
	{"cors", map[string]subOp{"GET": {"GetBucketCors", "s3:GetBucketCORS"}, "PUT": {"PutBucketCors", "s3:PutBucketCORS"}, "DELETE": {"DeleteBucketCors", "s3:PutBucketCORS"}}},
	{"encryption", map[string]subOp{"GET": {"GetBucketEncryption", "s3:GetEncryptionConfiguration"},
		"PUT": {"PutBucketEncryption", "s3:PutEncryptionConfiguration"}, "DELETE": {"DeleteBucketEncryption", "s3:PutEncryptionConfiguration"}}},
	{"inventory", map[string]subOp{"GET": {"GetBucketInventoryConfiguration", "s3:GetInventoryConfiguration"},
		"PUT": {"PutBucketInventoryConfiguration", "s3:PutInventoryConfiguration"}, "DELETE": {"DeleteBucketInventoryConfiguration", "s3:PutInventoryConfiguration"}}},
	{"notification", map[string]subOp{"GET": {"GetBucketNotificationConfiguration", "s3:GetBucketNotification"},
		"PUT": {"PutBucketNotificationConfiguration", "s3:PutBucketNotification"}}},
	{"logging", map[string]subOp{"GET": {"GetBucketLogging", ""}, "PUT": {"PutBucketLogging", ""}}},
	{"website", map[string]subOp{"GET": {"GetBucketWebsite", ""}, "PUT": {"PutBucketWebsite", ""}, "DELETE": {"DeleteBucketWebsite", ""}}},
	{"replication", map[string]subOp{"GET": {"GetBucketReplication", "s3:GetReplicationConfiguration"},
		"PUT": {"PutBucketReplication", "s3:PutReplicationConfiguration"}, "DELETE": {"DeleteBucketReplication", "s3:PutReplicationConfiguration"}}},
	{"object-lock", map[string]subOp{"GET": {"GetObjectLockConfiguration", "s3:GetBucketObjectLockConfiguration"},
		"PUT": {"PutObjectLockConfiguration", "s3:PutBucketObjectLockConfiguration"}}},
	{"ownershipControls", map[string]subOp{"GET": {"GetBucketOwnershipControls", ""}, "PUT": {"PutBucketOwnershipControls", ""}, "DELETE": {"DeleteBucketOwnershipControls", "s3:PutBucketOwnershipControls"}}},
	{"publicAccessBlock", map[string]subOp{"GET": {"GetPublicAccessBlock", "s3:GetBucketPublicAccessBlock"},
		"PUT": {"PutPublicAccessBlock", "s3:PutBucketPublicAccessBlock"}, "DELETE": {"DeletePublicAccessBlock", "s3:PutBucketPublicAccessBlock"}}},
	{"policyStatus", map[string]subOp{"GET": {"GetBucketPolicyStatus", ""}}},
	{"accelerate", map[string]subOp{"GET": {"GetBucketAccelerateConfiguration", "s3:GetAccelerateConfiguration"}, "PUT": {"PutBucketAccelerateConfiguration", "s3:PutAccelerateConfiguration"}}},
	{"requestPayment", map[string]subOp{"GET": {"GetBucketRequestPayment", ""}, "PUT": {"PutBucketRequestPayment", ""}}},
	{"analytics", map[string]subOp{"GET": {"GetBucketAnalyticsConfiguration", "s3:GetAnalyticsConfiguration"},
		"PUT": {"PutBucketAnalyticsConfiguration", "s3:PutAnalyticsConfiguration"}, "DELETE": {"DeleteBucketAnalyticsConfiguration", "s3:PutAnalyticsConfiguration"}}},
	{"metrics", map[string]subOp{"GET": {"GetBucketMetricsConfiguration", "s3:GetMetricsConfiguration"},
		"PUT": {"PutBucketMetricsConfiguration", "s3:PutMetricsConfiguration"}, "DELETE": {"DeleteBucketMetricsConfiguration", "s3:PutMetricsConfiguration"}}},
	{"intelligent-tiering", map[string]subOp{"GET": {"GetBucketIntelligentTieringConfiguration", "s3:GetIntelligentTieringConfiguration"},
		"PUT": {"PutBucketIntelligentTieringConfiguration", "s3:PutIntelligentTieringConfiguration"}, "DELETE": {"DeleteBucketIntelligentTieringConfiguration", "s3:PutIntelligentTieringConfiguration"}}},
}

// objectSubresources, in the order they are matched. Bucket subresources
// on an object's path (?versions, ?versioning, ?uploads on a GET, ...)
// are parameters S3 ignores there: the object operation runs, and is what
// is authorized.
var objectSubresources = []subresource{
	{"acl", map[string]subOp{"GET": {"GetObjectAcl", ""}, "PUT": {"PutObjectAcl", ""}}},
	{"tagging", map[string]subOp{"GET": {"GetObjectTagging", ""}, "PUT": {"PutObjectTagging", ""}, "DELETE": {"DeleteObjectTagging", ""}}},
	{"attributes", map[string]subOp{"GET": {"GetObjectAttributes", ""}}},
	{"legal-hold", map[string]subOp{"GET": {"GetObjectLegalHold", ""}, "PUT": {"PutObjectLegalHold", ""}}},
	{"retention", map[string]subOp{"GET": {"GetObjectRetention", ""}, "PUT": {"PutObjectRetention", ""}}},
	{"torrent", map[string]subOp{"GET": {"GetObjectTorrent", ""}}},
	{"restore", map[string]subOp{"POST": {"RestoreObject", ""}}},
	{"select", map[string]subOp{"POST": {"SelectObjectContent", "s3:GetObject"}}},
}

// served are the operations the embedded S3 runs; every other routed
// operation is answered 501 NotImplemented.
var served = map[string]bool{
	"ListBuckets": true, "CreateBucket": true, "DeleteBucket": true, "HeadBucket": true,
	"ListObjects": true, "ListObjectsV2": true, "ListObjectVersions": true, "GetBucketLocation": true,
	"GetBucketVersioning": true, "PutBucketVersioning": true,
	"GetBucketPolicy": true, "PutBucketPolicy": true, "DeleteBucketPolicy": true,
	"DeleteObjects": true, "ListMultipartUploads": true,
	"PutObject": true, "CopyObject": true, "GetObject": true, "HeadObject": true, "DeleteObject": true,
	"CreateMultipartUpload": true, "UploadPart": true, "CompleteMultipartUpload": true,
	"AbortMultipartUpload": true, "ListParts": true,
}

// routeS3 decides a path-style request's operation. Keys are the path
// after the bucket, percent-decoded once and otherwise literal: dot
// segments, empty segments and a trailing slash are part of the key.
func routeS3(r *http.Request) s3Call {
	path := strings.TrimPrefix(r.URL.Path, "/")
	bucket, key, _ := strings.Cut(path, "/")
	q := r.URL.Query()
	c := s3Call{bucket: bucket, key: key, query: q}
	if vs, ok := q["versionId"]; ok {
		c.hasVersion, c.versionID = true, vs[0]
	}
	has := func(k string) bool { _, ok := q[k]; return ok }
	m := r.Method
	switch {
	case bucket == "":
		c.op = map[string]string{"GET": "ListBuckets"}[m]
	case key == "":
		for _, sub := range bucketSubresources {
			if has(sub.name) {
				o, ok := sub.ops[m]
				if !ok {
					o = subOp{op: "MethodNotAllowed"}
				}
				c.op, c.action = o.op, o.action
				return c
			}
		}
		switch m {
		case "GET":
			c.op = "ListObjects"
			if q.Get("list-type") == "2" {
				c.op = "ListObjectsV2"
			}
		case "HEAD":
			c.op = "HeadBucket"
		case "PUT":
			c.op = "CreateBucket"
		case "DELETE":
			c.op = "DeleteBucket"
		case "POST":
			c.op = "PostObject" // a browser form upload
		}
	default:
		// The uploadId parameter makes a multipart operation whatever its
		// value: an empty one names no upload (NoSuchUpload), it never
		// falls through to the object (a DELETE would delete it).
		if ids, ok := q["uploadId"]; ok {
			c.uploadID = ids[0]
			c.op = map[string]string{"GET": "ListParts", "PUT": "UploadPart", "POST": "CompleteMultipartUpload", "DELETE": "AbortMultipartUpload"}[m]
			break
		}
		if m == "POST" && has("uploads") {
			c.op = "CreateMultipartUpload"
			break
		}
		for _, sub := range objectSubresources {
			if o, ok := sub.ops[m]; ok && has(sub.name) {
				c.op, c.action = o.op, o.action
				return c
			}
		}
		switch m {
		case "GET":
			c.op = "GetObject"
		case "HEAD":
			c.op = "HeadObject"
		case "PUT":
			c.op = "PutObject"
			if r.Header.Get("X-Amz-Copy-Source") != "" {
				c.op = "CopyObject"
			}
		case "DELETE":
			c.op = "DeleteObject"
		}
	}
	if c.op == "" {
		c.op = "MethodNotAllowed"
	}
	return c
}

// access is how IAM and bucket policies see a call: its actions on its
// resources (DeleteObjects is authorized key by key, by its handler).
func (c s3Call) accesses(r *http.Request) []access {
	bucketARN := "arn:aws:s3:::" + c.bucket
	object := bucketARN + "/" + c.key
	one := func(action, res string) []access { return []access{{action: action, resource: res}} }
	versioned := func(plain, version string) string {
		if c.hasVersion && c.versionID != "" {
			return version
		}
		return plain
	}
	switch c.op {
	case "ListBuckets":
		return one("s3:ListAllMyBuckets", "*")
	case "ListObjects", "ListObjectsV2", "HeadBucket":
		return []access{{action: "s3:ListBucket", resource: bucketARN, keys: map[string]string{"s3:prefix": c.query.Get("prefix")}}}
	case "ListObjectVersions":
		return []access{{action: "s3:ListBucketVersions", resource: bucketARN, keys: map[string]string{"s3:prefix": c.query.Get("prefix")}}}
	case "DeleteObjects", "MethodNotAllowed":
		return nil
	case "PostObject":
		return one("s3:PutObject", bucketARN+"/*")
	case "GetObject", "HeadObject":
		return one(versioned("s3:GetObject", "s3:GetObjectVersion"), object)
	case "DeleteObject":
		return one(versioned("s3:DeleteObject", "s3:DeleteObjectVersion"), object)
	case "GetObjectAcl":
		return one(versioned("s3:GetObjectAcl", "s3:GetObjectVersionAcl"), object)
	case "PutObjectAcl":
		return one(versioned("s3:PutObjectAcl", "s3:PutObjectVersionAcl"), object)
	case "GetObjectTagging":
		return one(versioned("s3:GetObjectTagging", "s3:GetObjectVersionTagging"), object)
	case "PutObjectTagging":
		return one(versioned("s3:PutObjectTagging", "s3:PutObjectVersionTagging"), object)
	case "DeleteObjectTagging":
		return one(versioned("s3:DeleteObjectTagging", "s3:DeleteObjectVersionTagging"), object)
	case "GetObjectAttributes":
		return []access{{action: versioned("s3:GetObject", "s3:GetObjectVersion"), resource: object},
			{action: versioned("s3:GetObjectAttributes", "s3:GetObjectVersionAttributes"), resource: object}}
	case "PutObject", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload":
		return one("s3:PutObject", object)
	case "CopyObject":
		out := one("s3:PutObject", object)
		if src, ver, ok := copySource(r); ok {
			action := "s3:GetObject"
			if ver != "" {
				action = "s3:GetObjectVersion"
			}
			out = append(out, access{action: action, resource: "arn:aws:s3:::" + src})
		}
		return out
	case "AbortMultipartUpload":
		return one("s3:AbortMultipartUpload", object)
	case "ListParts":
		return one("s3:ListMultipartUploadParts", object)
	}
	action := c.action
	if action == "" {
		action = "s3:" + c.op
	}
	if c.key != "" {
		return one(action, object)
	}
	return one(action, bucketARN)
}

// copySource is a CopyObject's (or UploadPartCopy's) source "bucket/key"
// and version id.
func copySource(r *http.Request) (src, versionID string, ok bool) {
	h := r.Header.Get("X-Amz-Copy-Source")
	if h == "" {
		return "", "", false
	}
	path, query, _ := strings.Cut(h, "?")
	src, err := url.PathUnescape(strings.TrimPrefix(path, "/"))
	if err != nil || !strings.Contains(src, "/") {
		return "", "", false
	}
	if q, err := url.ParseQuery(query); err == nil {
		versionID = q.Get("versionId")
	}
	return src, versionID, true
}
