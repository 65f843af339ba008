package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/spf13/cobra"

	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/awsconfig"
)

// localClient connects to the running local server (run and fault act on
// it alone).
func localClient(cmd *cobra.Command, conn *connOpts) (*client, error) {
	c, err := conn.connect(cmd.Context())
	if err != nil {
		return nil, err
	}
	if c.local == nil {
		return nil, fmt.Errorf("%s is not the local server of %s: %s acts on a local server only (name its state folder with --dir)", c.url, conn.stateDir(), cmd.CommandPath())
	}
	return c, nil
}

// envCmd prints the variables that aim SDKs, the AWS CLI and icehold's own
// CLI at the local server.
func envCmd(conn *connOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "env",
		Short: "Print the exports that aim the AWS SDKs, the AWS CLI and icehold at the local server: eval \"$(icehold local env)\"",
		Long: `Prints the environment of the running local server as shell exports:
AWS_ENDPOINT_URL (its edge port: every AWS service), the region and its keys,
and ICEHOLD_URL, ICEHOLD_TOKEN (the admin token) and ICEHOLD_CATALOG.

  eval "$(icehold local env)"

The AWS SDKs and the AWS CLI v2 honour AWS_ENDPOINT_URL; the AWS CLI v1 does
not: give it --endpoint-url "$AWS_ENDPOINT_URL". These keys replace your own
AWS credentials in that shell.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info, err := conn.localInfo()
			if err != nil {
				return err
			}
			if info == nil {
				return fmt.Errorf("no local server in %s (no local.json): start it with `make run`, or name its state folder with --dir", conn.stateDir())
			}
			if info.AWSEndpoint == "" {
				return fmt.Errorf("the local server of %s predates its AWS endpoint: restart it (make run)", conn.stateDir())
			}
			vars := [][2]string{
				{"AWS_ENDPOINT_URL", info.AWSEndpoint},
				{"AWS_REGION", info.Region}, {"AWS_DEFAULT_REGION", info.Region},
				{"AWS_ACCESS_KEY_ID", info.AccessKey}, {"AWS_SECRET_ACCESS_KEY", info.SecretKey},
				{"ICEHOLD_URL", info.RESTURL}, {"ICEHOLD_TOKEN", info.AdminToken}, {"ICEHOLD_CATALOG", info.Catalog},
			}
			out := cmd.OutOrStdout()
			if conn.output == "json" {
				m := map[string]string{}
				for _, v := range vars {
					m[v[0]] = v[1]
				}
				return writeJSON(out, m)
			}
			for _, v := range vars {
				fmt.Fprintf(out, "export %s=%s\n", v[0], shellQuote(v[1]))
			}
			return nil
		},
	}
}

// shellQuote quotes s for sh when it holds more than safe characters.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/@%+=,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// writeJSON prints v as indented JSON, every nil list as [] (a script's
// jq '.tables[]' then reads an empty list, not null).
func writeJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	if v == nil {
		return enc.Encode(v)
	}
	return enc.Encode(nonNull(reflect.ValueOf(v)).Interface())
}

// nonNull is a copy of v whose nil slices, at any depth, are empty ones
// (byte slices, json.RawMessage among them, stay as they are).
func nonNull(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type()).Elem()
		out.Set(nonNull(v.Elem()))
		return out
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type().Elem())
		out.Elem().Set(nonNull(v.Elem()))
		return out
	case reflect.Struct:
		out := reflect.New(v.Type()).Elem()
		out.Set(v)
		for i := 0; i < v.NumField(); i++ {
			if out.Field(i).CanSet() {
				out.Field(i).Set(nonNull(v.Field(i)))
			}
		}
		return out
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return v
		}
		out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := 0; i < v.Len(); i++ {
			out.Index(i).Set(nonNull(v.Index(i)))
		}
		return out
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			out.SetMapIndex(it.Key(), nonNull(it.Value()))
		}
		return out
	}
	return v
}

// runScheduleCmd runs one of the local server's schedules now.
func runScheduleCmd(conn *connOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "run " + strings.Join(server.Schedules, "|"),
		Short: "Run one of the local server's schedules now and print what it did",
		Long: `Runs a schedule of the running local server now, as its timer would, and
prints the run's report:

  retention    partition retention and snapshot expiry (hourly; rate(1 hour) in AWS)
  hold-expiry  soft-deleted tables past their hold period (every 15 minutes)
  reconcile    restarts stuck purge jobs, then sweeps orphans (every minute; 5 in AWS)
  orphans      the orphan sweep alone: metadata files of requests lost an hour ago`,
		Args:      exactArgs(1),
		ValidArgs: server.Schedules,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(server.Schedules, args[0]) {
				return usagef(cmd, "no schedule %q: want one of %s", args[0], strings.Join(server.Schedules, ", "))
			}
			c, err := localClient(cmd, conn)
			if err != nil {
				return err
			}
			var res struct {
				Schedule string          `json:"schedule"`
				Report   json.RawMessage `json:"report"`
			}
			if err := c.do(cmd.Context(), "POST", server.SchedulePath(args[0]), nil, &res); err != nil {
				return err
			}
			if c.output == "json" {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			var rep map[string]any
			_ = json.Unmarshal(res.Report, &rep)
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s ran: %s\n", res.Schedule, summary(rep))
			return err
		},
	}
}

// summary prints a report's fields as k=v, nested objects flattened.
func summary(rep map[string]any) string {
	var parts []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			switch v := m[k].(type) {
			case map[string]any:
				walk(prefix+k+".", v)
			case nil:
			default:
				b, _ := json.Marshal(v)
				parts = append(parts, prefix+k+"="+string(b))
			}
		}
	}
	walk("", rep)
	return strings.Join(parts, " ")
}

// faultSid marks the bucket policy statements `icehold local fault` adds.
const faultSid = "IceholdFaultDenyDeletes"

// faultCmd adds and clears practice faults on the local server.
func faultCmd(conn *connOpts) *cobra.Command {
	deny := &cobra.Command{
		Use:   "deny-deletes NAMESPACE.TABLE",
		Short: "Deny deleting the table's files (a bucket policy): its purge's batches dead-letter",
		Long: `Puts a bucket policy statement on the local warehouse bucket that denies
s3:DeleteObject under the table's location, as a misconfigured policy in AWS
would. Drop the table with purge: each batch fails until its receives run
out (5, 30 s apart), lands in the delete DLQ, and the job turns
DEAD_LETTERED. Then practise the fix: icehold local fault clear, and
icehold local redrive (or the aws sqs commands of docs/operations.md).`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			levels, name, err := splitIdent(args[0])
			if err != nil {
				return usagef(cmd, "%v", err)
			}
			c, err := localClient(cmd, conn)
			if err != nil {
				return err
			}
			var loaded struct {
				Metadata struct {
					Location string `json:"location"`
				} `json:"metadata"`
			}
			if err := c.do(cmd.Context(), "GET", tableKind.restPath(c, levels, name), nil, &loaded); err != nil {
				return err
			}
			bucket, prefix, ok := strings.Cut(strings.TrimPrefix(loaded.Metadata.Location, "s3://"), "/")
			if !ok || !strings.HasPrefix(loaded.Metadata.Location, "s3://") {
				return fmt.Errorf("table %s lies at %q, not in an S3 bucket", args[0], loaded.Metadata.Location)
			}
			resource := "arn:aws:s3:::" + bucket + "/" + strings.TrimSuffix(prefix, "/") + "/*"
			err = editPolicy(cmd.Context(), c.local, bucket, func(p *bucketPolicy) {
				for _, st := range p.Statement {
					if st["Sid"] == faultSid+tableSid(args[0]) {
						return
					}
				}
				p.Statement = append(p.Statement, map[string]any{"Sid": faultSid + tableSid(args[0]), "Effect": "Deny", "Principal": "*",
					"Action": "s3:DeleteObject", "Resource": resource})
			})
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "deletes denied under %s (bucket policy of %s); undo: icehold local fault clear\n", loaded.Metadata.Location, bucket)
			return err
		},
	}
	clear := &cobra.Command{
		Use:   "clear",
		Short: "Remove every fault icehold local fault added",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := localClient(cmd, conn)
			if err != nil {
				return err
			}
			removed := 0
			err = editPolicy(cmd.Context(), c.local, c.local.Bucket, func(p *bucketPolicy) {
				kept := p.Statement[:0]
				for _, st := range p.Statement {
					if sid, _ := st["Sid"].(string); strings.HasPrefix(sid, faultSid) {
						removed++
						continue
					}
					kept = append(kept, st)
				}
				p.Statement = kept
			})
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%d fault%s cleared\n", removed, plural(int64(removed)))
			return err
		},
	}
	return group("fault", "Practice faults on the local server: deny-deletes, clear", deny, clear)
}

// tableSid is a table's part of a statement id (letters and digits, as IAM
// wants them).
func tableSid(ident string) string {
	var b strings.Builder
	for _, r := range ident {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteString(fmt.Sprintf("x%02x", r))
		}
	}
	return b.String()
}

type bucketPolicy struct {
	Version   string           `json:"Version"`
	Statement []map[string]any `json:"Statement"`
}

// editPolicy reads the bucket's policy (none: empty), edits it and writes
// it back; a policy left without statements is deleted.
func editPolicy(ctx context.Context, info *server.Info, bucket string, edit func(*bucketPolicy)) error {
	ep := awsconfig.Endpoints{S3: info.S3Endpoint, Region: info.Region, AccessKey: info.AccessKey, SecretKey: info.SecretKey}
	cfg, err := awsconfig.Load(ctx, ep)
	if err != nil {
		return err
	}
	s3c := awsconfig.S3(cfg, ep)
	p := bucketPolicy{Version: "2012-10-17"}
	got, err := s3c.GetBucketPolicy(ctx, &s3.GetBucketPolicyInput{Bucket: aws.String(bucket)})
	var apiErr interface{ ErrorCode() string }
	switch {
	case err == nil:
		if err := json.Unmarshal([]byte(aws.ToString(got.Policy)), &p); err != nil {
			return fmt.Errorf("the policy of bucket %s: %w", bucket, err)
		}
	case errors.As(err, &apiErr) && apiErr.ErrorCode() == "NoSuchBucketPolicy":
	default:
		return fmt.Errorf("the policy of bucket %s: %w", bucket, err)
	}
	edit(&p)
	if len(p.Statement) == 0 {
		_, err = s3c.DeleteBucketPolicy(ctx, &s3.DeleteBucketPolicyInput{Bucket: aws.String(bucket)})
		return err
	}
	raw, _ := json.Marshal(p)
	_, err = s3c.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: aws.String(bucket), Policy: aws.String(string(raw))})
	return err
}
