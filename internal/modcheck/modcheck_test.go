package modcheck

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// libraryRequires are the only modules the library's go.mod may require
// directly: what its packages import, and its test libraries.
var libraryRequires = []string{
	"github.com/google/uuid",
	"github.com/redis/rueidis",
	"github.com/stretchr/testify", // tests
	"go.uber.org/goleak",          // tests
}

// libraryImports are the only modules the published packages may import
// outside the standard library.
var libraryImports = []string{"github.com/google/uuid", "github.com/redis/rueidis"}

func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	return strings.Fields(string(out))
}

// TestDirectRequires: go.mod requires directly only libraryRequires.
func TestDirectRequires(t *testing.T) {
	for _, m := range goList(t, "-m", "-f", "{{if not .Indirect}}{{if not .Main}}{{.Path}}{{end}}{{end}}", "all") {
		if !slices.Contains(libraryRequires, m) {
			t.Errorf("go.mod requires %s directly; move what needs it to a module of its own (see SUBMODULES in the Makefile)", m)
		}
	}
}

// TestPackageImports: the packages a user imports (rlock and every package
// of this module it builds on, pubsub, watchdog, the CLI) import, outside
// the standard library and this module, only rueidis and uuid.
func TestPackageImports(t *testing.T) {
	lines := goList(t, "-deps", "-f", `{{if and (not .Standard) .Module}}{{if .Module.Main}}{{join .Imports " "}}{{end}}{{end}}`,
		"github.com/goredisson/locks/rlock/...", "github.com/goredisson/locks/pubsub/...",
		"github.com/goredisson/locks/watchdog/...", "github.com/goredisson/locks/cmd/rlock")
	var imports []string
	for _, p := range lines {
		if strings.Contains(strings.SplitN(p, "/", 2)[0], ".") && !strings.HasPrefix(p, "github.com/goredisson/locks/") && !slices.Contains(imports, p) {
			imports = append(imports, p)
		}
	}
	seen := map[string]bool{}
	for _, m := range goList(t, append([]string{"-f", "{{.Module.Path}}"}, imports...)...) {
		seen[m] = true
		if !slices.Contains(libraryImports, m) {
			t.Errorf("the library's packages import module %s", m)
		}
	}
	for _, m := range libraryImports {
		if !seen[m] {
			t.Errorf("the library no longer imports %s: drop it from libraryImports", m)
		}
	}
}
