package claudecode

// OfflineEnv is the environment that keeps the CLI from calling anything but the Messages API
// it is pointed at: no telemetry, error reports, update checks or auxiliary model traffic
// (docs: PROTOCOL.md, "Running the real CLI offline"). Add it to Command.Env.
func OfflineEnv() []string {
	return []string{
		"DISABLE_TELEMETRY=1",
		"DISABLE_ERROR_REPORTING=1",
		"DISABLE_AUTOUPDATER=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	}
}
