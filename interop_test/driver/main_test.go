package driver_test

import (
	"testing"

	"github.com/goredisson/locks/internal/redistest"
)

func TestMain(m *testing.M) { redistest.VerifyTestMain(m) }
