package redistest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFlavor: the servers the harness starts are the flavor of the run
// (REDISTEST_FLAVOR): Valkey reports valkey_version in INFO server, Redis
// does not.
func TestFlavor(t *testing.T) {
	srv := Standalone(t)
	if srv.kind != kindLocal {
		t.Skipf("an external or Docker server (%s): its flavor is not the harness' choice", srv)
	}
	m, err := srv.Do(testCtx(t), "INFO", "server")
	require.NoError(t, err)
	info, err := m.ToString()
	require.NoError(t, err)
	require.Equal(t, Flavor() == "valkey", strings.Contains(info, "valkey_version:"), "%s run, INFO server:\n%s", Flavor(), info)
}
