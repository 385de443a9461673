package claudecode

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// guardEnv makes the test binary act as a guard (see RunGuard), so that the guard's tests run
// the real thing without a separate program.
const guardEnv = "CLAUDECODE_TEST_RUN_GUARD"

func TestMain(m *testing.M) {
	if os.Getenv(guardEnv) == "1" {
		os.Exit(RunGuard(os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}
