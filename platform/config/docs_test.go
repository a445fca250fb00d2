package config_test

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/emsanalytics/emsquery/platform/config"
)

// settingNames are the env tags of every field of t, nested structs included.
func settingNames(t reflect.Type) []string {
	var names []string
	for f := range t.Fields() {
		if name := f.Tag.Get("env"); name != "" {
			names = append(names, name)
		}
		if f.Type.Kind() == reflect.Struct {
			names = append(names, settingNames(f.Type)...)
		}
	}
	return names
}

// Every setting is documented where operators look for it: in docs/configuration.md (a table row
// or a mention, in backquotes) and in deploy/.env.example (a line, set or commented out). A new
// setting fails here until both say what it does.
func TestEverySettingDocumented(t *testing.T) {
	names := settingNames(reflect.TypeFor[config.Config]())
	if len(names) < 40 {
		t.Fatalf("found %d settings: the walk over config.Config missed some", len(names))
	}
	root := filepath.Join("..", "..")
	docs, err := os.ReadFile(filepath.Join(root, "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile(filepath.Join(root, "deploy", ".env.example"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if !strings.Contains(string(docs), "`"+name+"`") {
			t.Errorf("%s is not documented in docs/configuration.md", name)
		}
		if !regexp.MustCompile(`(?m)^#?\s*` + regexp.QuoteMeta(name) + `=`).Match(example) {
			t.Errorf("%s has no line in deploy/.env.example", name)
		}
	}
}
