//go:build !race

package watchdog

import "time"

// minReportCost is the least time reserved per hold for reporting it lost
// (measured here: about 1µs to abandon a hold and end its HoldContext).
const minReportCost = 5 * time.Microsecond
