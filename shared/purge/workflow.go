package purge

import (
	"context"
	_ "embed"
	"strings"
)

// Definition is the purge state machine (Amazon States Language), with
// ${PlanFunction}, ${ProgressFunction}, ${FinalizeFunction} and
// ${DeleteQueueUrl} to substitute. The CDK stack deploys it and the local
// engine runs it: one definition.
//
//go:embed workflow.asl.json
var Definition string

// Substitute fills the definition's placeholders.
func Substitute(def string, values map[string]string) string {
	for k, v := range values {
		def = strings.ReplaceAll(def, "${"+k+"}", v)
	}
	return def
}

// StepInput is what the progress and finalize functions receive; an Error
// (from the workflow's catch path) asks finalize to fail the job instead.
type StepInput struct {
	Input
	Error *struct {
		Error string `json:"Error"`
		Cause string `json:"Cause"`
	} `json:"error,omitempty"`
}

// FinalizeStep is the finalize function's handler: finalize, or, when the
// workflow's catch path sends an error, fail the job with it.
func (s *Service) FinalizeStep(ctx context.Context, in StepInput) (FinalizeResult, error) {
	if in.Error != nil {
		reason := in.Error.Error
		if in.Error.Cause != "" {
			reason += ": " + in.Error.Cause
		}
		return FinalizeResult{Done: true}, s.Fail(ctx, in.Input, reason)
	}
	return s.Finalize(ctx, in.Input)
}
