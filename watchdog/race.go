//go:build race

package watchdog

import "time"

// minReportCost under the race detector, which makes the work of
// reporting a loss several times slower (measured: about 8µs a hold).
const minReportCost = 25 * time.Microsecond
