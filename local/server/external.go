package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/icehold/icehold/local/emulators"
	"github.com/icehold/icehold/shared/bucketguard"
)

// External puts services on endpoints outside the process (moto,
// LocalStack) instead of the embedded emulators; "" keeps a service
// embedded. Step Functions always stays icehold's own engine: moto runs a
// definition's Lambda tasks only in Docker.
type External struct {
	DynamoDB, S3, SQS, Events string
}

// ExternalAt puts every service it can on one endpoint (moto_server and
// LocalStack serve them all on one port).
func ExternalAt(url string) External {
	url = strings.TrimRight(url, "/")
	return External{DynamoDB: url, S3: url, SQS: url, Events: url}
}

// Any reports whether some service is external.
func (e External) Any() bool { return e != External{} }

// names are the stack's resource names.
type names struct {
	table, queue, dlq, bus, machine string
}

// namesOf are the resources of a stack named stack ("": DefaultStack), as
// the CDK stack names them (CloudFormation suffixes the table's and the
// queues').
func namesOf(stack string) names {
	stack = cmp.Or(stack, DefaultStack)
	return names{table: stack + "-Catalog", queue: stack + "-DeleteQueue", dlq: stack + "-DeleteDLQ",
		bus: stack + "-lifecycle", machine: stack + "-purge"}
}

// legacyNames are make run's names before they were the stack's.
var legacyNames = names{table: "icehold", queue: "icehold-delete", dlq: "icehold-delete-dlq", bus: "icehold", machine: "icehold-purge"}

// namesFor keeps the names a state folder was made with: its local.json
// names the table of the last start (a folder from before the stack's
// names keeps its records, queues and executions).
func namesFor(dir, stack string) names {
	if dir != "" && stack == "" {
		var prev Info
		if raw, err := os.ReadFile(filepath.Join(dir, "local.json")); err == nil && json.Unmarshal(raw, &prev) == nil && prev.Table == legacyNames.table {
			return legacyNames
		}
	}
	return namesOf(stack)
}

// Settings of the CDK stack the external resources get too (infra/).
const (
	ttlAttribute      = "expires_at"
	queueRetentionSec = "1209600" // 14 days
)

// enableTTL turns on the table's TTL attribute, as the stack does; the
// embedded emulator has no TTL and is not asked.
func enableTTL(ctx context.Context, db *dynamodb.Client, table string) error {
	_, err := db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(table),
		TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String(ttlAttribute), Enabled: aws.Bool(true)}})
	if err != nil && !strings.Contains(err.Error(), "already enabled") {
		return fmt.Errorf("table ttl: %w", err)
	}
	return nil
}

// createBucket makes the warehouse bucket on an external S3 (the embedded
// one is created with it); an existing bucket of ours is fine.
func createBucket(ctx context.Context, c *s3.Client, bucket string) error {
	_, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)})
	var owned *s3types.BucketAlreadyOwnedByYou
	if err != nil && !errors.As(err, &owned) {
		return fmt.Errorf("create bucket %s: %w", bucket, err)
	}
	return nil
}

// guardBucket makes the warehouse bucket what the stack makes it (SPEC §2,
// the bucket enforces the lifecycle): versioned, with the guard policy
// (shared/bucketguard). Its deleters are the local functions' role (the
// one role every local function acts as, the delete function's among
// them) and the emulators' own key, the local admin identity `icehold
// local` commands use: the local break-glass role. Engines' sessions (the
// engine role, vended keys) are neither: the embedded S3 refuses them a
// version delete, as the bucket policy does in AWS.
func guardBucket(ctx context.Context, c *s3.Client, bucket string) error {
	_, err := c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String(bucket),
		VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled}})
	if err != nil {
		return fmt.Errorf("version bucket %s: %w", bucket, err)
	}
	policy := bucketguard.Policy("aws", bucket, []string{emulators.RoleARN(FunctionsRole), emulators.RootPrincipal}, nil)
	if _, err := c.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: aws.String(bucket), Policy: aws.String(policy)}); err != nil {
		return fmt.Errorf("guard bucket %s: %w", bucket, err)
	}
	return nil
}

// createBus makes the lifecycle event bus on an external EventBridge.
func createBus(ctx context.Context, c *eventbridge.Client, bus string) error {
	_, err := c.CreateEventBus(ctx, &eventbridge.CreateEventBusInput{Name: aws.String(bus)})
	var exists *ebtypes.ResourceAlreadyExistsException
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("create event bus %s: %w", bus, err)
	}
	return nil
}

// queueARN is a queue's ARN as its service states it (moto's account is not
// the embedded emulator's 000000000000).
func queueARN(ctx context.Context, c *sqs.Client, url string) (string, error) {
	out, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		return "", fmt.Errorf("queue arn of %s: %w", url, err)
	}
	return out.Attributes[string(sqstypes.QueueAttributeNameQueueArn)], nil
}
