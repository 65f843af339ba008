package infra_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/icehold/icehold/infra"
)

// A stack without admins deploys, but nobody can then create a catalog:
// the synth warns, naming the context value and how to give it. With
// admins there is no warning.
func TestSynthWarnsWithoutAdmins(t *testing.T) {
	assets := t.TempDir()
	fns, _ := filepath.Glob("../functions/*")
	for _, fn := range fns {
		dir := filepath.Join(assets, filepath.Base(fn))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "bootstrap"), []byte("stand-in"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	warning := assertions.Match_StringLikeRegexp(jsii.String("icehold:admins is empty.*nobody can create a catalog.*-c icehold:admins="))
	without := infra.NewStack(awscdk.NewApp(nil), "NoAdmins", infra.Props{AssetsDir: assets})
	assertions.Annotations_FromStack(without.Stack).HasWarning(jsii.String("*"), warning)
	with := infra.NewStack(awscdk.NewApp(nil), "Admins", infra.Props{AssetsDir: assets, Admins: []string{"arn:aws:iam::111122223333:role/Admin"}})
	assertions.Annotations_FromStack(with.Stack).HasNoWarning(jsii.String("*"), warning)
}
