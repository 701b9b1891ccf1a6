package redistest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestServerDiesWithParent runs a helper copy of the test binary that starts
// a server and then is SIGKILLed, so no Close runs: Pdeathsig must kill the
// server anyway.
func TestServerDiesWithParent(t *testing.T) {
	if os.Getenv("REDISTEST_HELPER") == "1" {
		s, err := StartServer(t.Context(), Config{Name: "orphan"})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("pid", s.Pid(), s.Dir)
		select {} // wait to be killed
	}
	helper := exec.Command(os.Args[0], "-test.run=^TestServerDiesWithParent$")
	helper.Env = append(os.Environ(), "REDISTEST_HELPER=1")
	out, err := helper.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, helper.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	f := strings.Fields(line)
	require.Len(t, f, 3, "helper said %q", line)
	t.Cleanup(func() { _ = os.RemoveAll(f[2]) }) // the helper never ran Close
	pid, err := strconv.Atoi(f[1])
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(pid, 0), "server must be running")

	require.NoError(t, helper.Process.Kill())
	_ = helper.Wait()
	require.Eventually(t, func() bool { return !alive(pid) }, 5*time.Second, 10*time.Millisecond,
		"server pid %d outlived its parent", pid)
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}
