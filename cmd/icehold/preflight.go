package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/smithy-go"
	"github.com/spf13/cobra"

	"github.com/icehold/icehold/shared/awsconfig"
)

// Lambda's rules the preflight applies (docs/design/infra.md, Delete function
// concurrency): a reservation may not leave the account fewer than
// minUnreserved concurrent executions for the functions without one; a purge
// at full speed runs the delete mapping's maximum plus the state machine's
// finalize steps (finalizeSteps) at once.
const (
	minUnreserved = 100
	finalizeSteps = 10
	// lambdaQuota names the quota to raise in Service Quotas.
	lambdaQuota = "Service Quotas: AWS Lambda, Concurrent executions, L-B99A9384"
)

// lambdaAPI is what the preflight asks Lambda.
type lambdaAPI interface {
	GetAccountSettings(context.Context, *lambda.GetAccountSettingsInput, ...func(*lambda.Options)) (*lambda.GetAccountSettingsOutput, error)
	GetFunctionConcurrency(context.Context, *lambda.GetFunctionConcurrencyInput, ...func(*lambda.Options)) (*lambda.GetFunctionConcurrencyOutput, error)
}

// stackAPI finds a deployed stack's function by its logical id.
type stackAPI interface {
	DescribeStackResource(context.Context, *cloudformation.DescribeStackResourceInput, ...func(*cloudformation.Options)) (*cloudformation.DescribeStackResourceOutput, error)
}

// preflightClients builds the AWS clients (tests replace it).
var preflightClients = func(ctx context.Context, region, profile, endpoint string) (lambdaAPI, stackAPI, error) {
	cfg, err := awsconfig.Load(ctx, awsconfig.Endpoints{Region: region, Profile: profile})
	if err != nil {
		return nil, nil, err
	}
	lc := lambda.NewFromConfig(cfg, func(o *lambda.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	})
	cc := cloudformation.NewFromConfig(cfg, func(o *cloudformation.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	})
	return lc, cc, nil
}

func preflightCmd(conn *connOpts) *cobra.Command {
	var stack, template, endpoint string
	c := &cobra.Command{
		Use:   "preflight [--stack NAME] [--template FILE]",
		Short: "Before a deploy: does the stack fit the account's Lambda concurrency, do brought buckets enforce the lifecycle (AWS credentials; --profile, --region)",
		Long: `Reads the synthesized template (make synth; default cdk.out/<stack>.template.json)
and the account's Lambda concurrency (GetAccountSettings), and says whether the
deploy fits: Lambda refuses a reserved concurrency that leaves the account fewer
than 100 unreserved executions. A reservation the deployed stack already holds is
counted as freed by the update. Also warns when the account's concurrency is below
what a purge uses at full speed. For each bucket the operator brings
(icehold:warehouse-buckets), checks that it enforces the lifecycle: versioning on,
and a policy that lets only icehold's delete role (and a break-glass role) delete
versions or change versioning, lifecycle rules or the policy; it names what is
missing and prints the statements to add. Exit status 1 when the stack does not
fit or a bucket is not guarded.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := cmp.Or(template, filepath.Join("cdk.out", stack+".template.json"))
			raw, err := os.ReadFile(path)
			if err != nil {
				return fmt.Errorf("%w (make synth writes it; --template names another)", err)
			}
			needs, err := concurrencyNeeds(raw)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			lc, sc, err := preflightClients(cmd.Context(), cmp.Or(conn.region, os.Getenv("AWS_REGION")), conn.profile, endpoint)
			if err != nil {
				return err
			}
			acct, err := accountConcurrency(cmd.Context(), lc)
			if err != nil {
				return err
			}
			held, err := heldReservations(cmd.Context(), lc, sc, stack, needs)
			if err != nil {
				return err
			}
			fit := preflight(cmd.OutOrStdout(), stack, needs, acct, held)
			buckets, roleID, err := broughtBuckets(raw)
			if err != nil || len(buckets) == 0 {
				return fit
			}
			role, err := deployedRoleName(cmd.Context(), sc, stack, roleID)
			if err != nil {
				return err
			}
			bc, partition, err := bucketClient(cmd.Context(), cmp.Or(conn.region, os.Getenv("AWS_REGION")), conn.profile, endpoint)
			if err != nil {
				return err
			}
			return errors.Join(fit, preflightBuckets(cmd.Context(), cmd.OutOrStdout(), bc, partition, buckets, role))
		},
	}
	f := c.Flags()
	f.StringVar(&stack, "stack", "Icehold", "the stack's name (icehold:stack-name)")
	f.StringVar(&template, "template", "", "the synthesized template (default cdk.out/<stack>.template.json)")
	f.StringVar(&endpoint, "endpoint-url", "", "Lambda, CloudFormation and S3 endpoint (LocalStack); empty: AWS")
	return c
}

// needs is what a template asks of the account's concurrency.
type needs struct {
	// Functions are the logical ids of its functions; Reserved those with
	// a reserved concurrency, and how much.
	Functions []string
	Reserved  map[string]int
	// MappingMax: the SQS event source mappings' maximum concurrency (the
	// delete queue's: a purge's deleters).
	MappingMax int
}

func concurrencyNeeds(template []byte) (needs, error) {
	var t struct {
		Resources map[string]struct {
			Type       string
			Properties struct {
				ReservedConcurrentExecutions *int
				ScalingConfig                *struct{ MaximumConcurrency int }
			}
		}
	}
	if err := json.Unmarshal(template, &t); err != nil || t.Resources == nil {
		return needs{}, fmt.Errorf("not a CloudFormation template (%v)", err)
	}
	n := needs{Reserved: map[string]int{}}
	for id, r := range t.Resources {
		switch {
		case r.Type == "AWS::Lambda::Function":
			n.Functions = append(n.Functions, id)
			if r.Properties.ReservedConcurrentExecutions != nil {
				n.Reserved[id] = *r.Properties.ReservedConcurrentExecutions
			}
		case r.Type == "AWS::Lambda::EventSourceMapping" && r.Properties.ScalingConfig != nil:
			n.MappingMax += r.Properties.ScalingConfig.MaximumConcurrency
		}
	}
	slices.Sort(n.Functions)
	return n, nil
}

// account is the account's concurrency in the region.
type account struct{ Quota, Unreserved int }

func accountConcurrency(ctx context.Context, lc lambdaAPI) (account, error) {
	out, err := lc.GetAccountSettings(ctx, &lambda.GetAccountSettingsInput{})
	if err != nil {
		return account{}, fmt.Errorf("lambda GetAccountSettings: %w", err)
	}
	a := account{}
	if l := out.AccountLimit; l != nil {
		a.Quota = int(l.ConcurrentExecutions)
		a.Unreserved = int(aws.ToInt32(l.UnreservedConcurrentExecutions))
	}
	return a, nil
}

// heldReservations are the reservations the deployed stack's functions hold
// now (an update replaces or removes them): none when the stack is not
// deployed yet.
func heldReservations(ctx context.Context, lc lambdaAPI, sc stackAPI, stack string, n needs) (map[string]int, error) {
	held := map[string]int{}
	for _, id := range n.Functions {
		res, err := sc.DescribeStackResource(ctx, &cloudformation.DescribeStackResourceInput{StackName: aws.String(stack), LogicalResourceId: aws.String(id)})
		var api smithy.APIError
		if errors.As(err, &api) && api.ErrorCode() == "ValidationError" {
			continue // no such stack, or no such resource in it yet
		}
		if err != nil {
			return nil, fmt.Errorf("cloudformation DescribeStackResource %s %s: %w", stack, id, err)
		}
		fn := aws.ToString(res.StackResourceDetail.PhysicalResourceId)
		c, err := lc.GetFunctionConcurrency(ctx, &lambda.GetFunctionConcurrencyInput{FunctionName: aws.String(fn)})
		if err != nil {
			return nil, fmt.Errorf("lambda GetFunctionConcurrency %s: %w", fn, err)
		}
		if r := int(aws.ToInt32(c.ReservedConcurrentExecutions)); r > 0 {
			held[id] = r
		}
	}
	return held, nil
}

// errDoesNotFit: the deploy would fail on the account's concurrency.
var errDoesNotFit = errors.New("the stack does not fit the account's Lambda concurrency")

// preflight writes the verdict; errDoesNotFit when Lambda would refuse the
// stack's reservations.
func preflight(w io.Writer, stack string, n needs, a account, held map[string]int) error {
	reserved, freed := 0, 0
	for _, r := range n.Reserved {
		reserved += r
	}
	for _, r := range held {
		freed += r
	}
	left := a.Unreserved + freed - reserved // unreserved once deployed
	fmt.Fprintf(w, "account: concurrent executions quota %d, %d unreserved\n", a.Quota, a.Unreserved)
	if reserved == 0 {
		fmt.Fprintf(w, "stack %s: reserves no concurrency (icehold:delete-reserved-concurrency unset)\n", stack)
	} else {
		var parts []string
		for _, id := range slices.Sorted(maps.Keys(n.Reserved)) {
			parts = append(parts, fmt.Sprintf("%s %d", id, n.Reserved[id]))
		}
		fmt.Fprintf(w, "stack %s: reserves %d (%s)", stack, reserved, strings.Join(parts, ", "))
		fmt.Fprintln(w)
	}
	if freed > 0 {
		fmt.Fprintf(w, "deployed: the stack's functions hold %d reserved now, which the update gives back first\n", freed)
	}
	if reserved > 0 && left < minUnreserved {
		fmt.Fprintf(w, "does not fit: the reservation would leave %d unreserved, and Lambda keeps at least %d: raise the quota to at least %d (%s), or deploy without icehold:delete-reserved-concurrency\n",
			left, minUnreserved, a.Quota+minUnreserved-left, lambdaQuota)
		return errDoesNotFit
	}
	fmt.Fprintf(w, "fits: %d unreserved after the deploy\n", left)
	// A reservation holds a purge at full speed (the mapping's maximum is
	// the reservation less the finalize steps); without one the purge
	// shares what is left with every other function.
	if full := n.MappingMax + finalizeSteps; reserved == 0 && left < full {
		fmt.Fprintf(w, "warning: a purge at full speed runs %d at once (%d deletes, %d finalize steps) beside the API and the sweeps, and %d are available: purges run slower, and a throttled delivery returns to the queue with its receive counted (enough of them dead-letter a healthy batch: redrive it). Raise the quota to 1000 (%s)\n",
			full, n.MappingMax, finalizeSteps, left, lambdaQuota)
	}
	return nil
}
