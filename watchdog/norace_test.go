//go:build !race

package watchdog_test

const raceEnabled = false
