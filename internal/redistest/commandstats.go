package redistest

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/rueidis"
)

// CommandCalls returns how many times Redis has run commands (lower case,
// as INFO commandstats names them: "evalsha", "publish"; those run by
// scripts included), summed over every node rc knows: the server, or each
// node of a cluster.
func CommandCalls(ctx context.Context, rc rueidis.Client, commands ...string) (int64, error) {
	var n int64
	for addr, node := range rc.Nodes() {
		info, err := node.Do(ctx, node.B().Info().Section("commandstats").Build()).ToString()
		if err != nil {
			return 0, fmt.Errorf("INFO commandstats of %s: %w", addr, err)
		}
		for _, line := range strings.Split(info, "\n") {
			line = strings.TrimSpace(line)
			for _, c := range commands {
				rest, ok := strings.CutPrefix(line, "cmdstat_"+c+":calls=")
				if !ok {
					continue
				}
				end := strings.IndexByte(rest, ',')
				if end < 0 {
					return 0, fmt.Errorf("INFO commandstats of %s: %q", addr, line)
				}
				calls, err := strconv.ParseInt(rest[:end], 10, 64)
				if err != nil {
					return 0, fmt.Errorf("INFO commandstats of %s: %q: %w", addr, line, err)
				}
				n += calls
			}
		}
	}
	return n, nil
}
