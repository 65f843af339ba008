package infra

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// StatefulRecord is the checked-in record of the stateful resources of the
// default synth (TestStatefulResourcesKeepTheirIdentity; docs/operations.md,
// Upgrade notes). It changes only with a migration note.
const StatefulRecord = "stateful.json"

// replacing are the stateful resource types and, for each, the properties
// whose change makes CloudFormation replace the resource. Replacing one
// loses its state: a retained table or bucket stays behind, orphaned, and
// the new one starts empty beside the old data; a replaced queue drops the
// batches waiting in it, a replaced state machine its running executions,
// a replaced bus the rules others put on it. A changed logical id (a renamed
// construct) replaces the resource too.
var replacing = map[string][]string{
	"AWS::DynamoDB::Table":             {"TableName", "KeySchema", "AttributeDefinitions", "LocalSecondaryIndexes"},
	"AWS::S3::Bucket":                  {"BucketName"},
	"AWS::SQS::Queue":                  {"QueueName", "FifoQueue"},
	"AWS::StepFunctions::StateMachine": {"StateMachineName", "StateMachineType"},
	"AWS::Events::EventBus":            {"Name", "EventSourceName"},
}

// Stateful is one stateful resource of a template: its logical id, type,
// deletion policy and the properties that would replace it (JSON, with the
// stack's name written {stack} so that the record holds for any name).
type Stateful struct {
	LogicalID      string                     `json:"logical-id"`
	Type           string                     `json:"type"`
	DeletionPolicy string                     `json:"deletion-policy"`
	Replacing      map[string]json.RawMessage `json:"replacing,omitempty"`
}

// StatefulResources are a synthesized template's stateful resources, by
// logical id.
func StatefulResources(template []byte, stackName string) ([]Stateful, error) {
	var t struct {
		Resources map[string]struct {
			Type           string
			DeletionPolicy string
			Properties     map[string]json.RawMessage
		}
	}
	if err := json.Unmarshal(template, &t); err != nil {
		return nil, fmt.Errorf("template: %w", err)
	}
	var out []Stateful
	for _, id := range slices.Sorted(maps.Keys(t.Resources)) {
		r := t.Resources[id]
		props, ok := replacing[r.Type]
		if !ok {
			continue
		}
		s := Stateful{LogicalID: id, Type: r.Type, DeletionPolicy: r.DeletionPolicy, Replacing: map[string]json.RawMessage{}}
		if s.DeletionPolicy == "" {
			s.DeletionPolicy = "Delete" // CloudFormation's default
		}
		for _, p := range props {
			if v, ok := r.Properties[p]; ok {
				if stackName != "" {
					v = json.RawMessage(strings.ReplaceAll(string(v), `"`+stackName+`-`, `"{stack}-`))
				}
				s.Replacing[p] = v
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// StatefulSummary is one line naming a template's stateful resources.
func StatefulSummary(res []Stateful) string {
	parts := make([]string, len(res))
	for i, r := range res {
		kind := r.Type[strings.LastIndex(r.Type, "::")+2:]
		parts[i] = fmt.Sprintf("%s %s (%s)", kind, r.LogicalID, r.DeletionPolicy)
	}
	return fmt.Sprintf("stateful resources (%d; an upgrade must keep them: docs/operations.md, Upgrade notes): %s", len(res), strings.Join(parts, ", "))
}
