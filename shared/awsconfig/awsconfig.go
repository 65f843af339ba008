// Package awsconfig builds the AWS SDK clients: from the Lambda environment
// in AWS, or pointed at local endpoints (emulators, LocalStack).
package awsconfig

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Endpoints overrides service endpoints; empty fields use AWS.
type Endpoints struct {
	DynamoDB string
	S3       string
	SQS      string
	SFN      string
	Events   string
	Region   string
	// Static keys for emulators; empty uses the default credential chain.
	AccessKey, SecretKey string
	// Profile is the shared config profile (the CLI's --profile).
	Profile string
}

// Load returns the SDK configuration.
func Load(ctx context.Context, ep Endpoints) (aws.Config, error) {
	opts := []func(*config.LoadOptions) error{}
	if ep.Region != "" {
		opts = append(opts, config.WithRegion(ep.Region))
	}
	if ep.Profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(ep.Profile))
	}
	if ep.AccessKey != "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(ep.AccessKey, ep.SecretKey, "")))
	}
	return config.LoadDefaultConfig(ctx, opts...)
}

// DynamoDB returns a DynamoDB client, at ep.DynamoDB when set.
func DynamoDB(cfg aws.Config, ep Endpoints) *dynamodb.Client {
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if ep.DynamoDB != "" {
			o.BaseEndpoint = aws.String(ep.DynamoDB)
			// Emulators send no CRC32 of their answers.
			o.DisableValidateResponseChecksum = true
		}
	})
}

// S3 returns an S3 client; against a local endpoint it uses path-style
// addressing and checksums only where required (what emulators speak).
func S3(cfg aws.Config, ep Endpoints) *s3.Client {
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		if ep.S3 != "" {
			o.BaseEndpoint = aws.String(ep.S3)
			o.UsePathStyle = true
			o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
			o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		}
	})
}

// SQS returns an SQS client, at ep.SQS when set.
func SQS(cfg aws.Config, ep Endpoints) *sqs.Client {
	return sqs.NewFromConfig(cfg, func(o *sqs.Options) {
		if ep.SQS != "" {
			o.BaseEndpoint = aws.String(ep.SQS)
		}
	})
}

// SFN returns a Step Functions client, at ep.SFN when set.
func SFN(cfg aws.Config, ep Endpoints) *sfn.Client {
	return sfn.NewFromConfig(cfg, func(o *sfn.Options) {
		if ep.SFN != "" {
			o.BaseEndpoint = aws.String(ep.SFN)
		}
	})
}

// EventBridge returns an EventBridge client, at ep.Events when set.
func EventBridge(cfg aws.Config, ep Endpoints) *eventbridge.Client {
	return eventbridge.NewFromConfig(cfg, func(o *eventbridge.Options) {
		if ep.Events != "" {
			o.BaseEndpoint = aws.String(ep.Events)
		}
	})
}
