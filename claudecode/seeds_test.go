package claudecode

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
)

// seedLines returns representative stdout lines: the inline ones above, the recorded CLI output in
// testdata/cli, and any transcripts in testdata/transcripts.
func seedLines() [][]byte {
	lines := [][]byte{}
	for _, l := range []string{
		lineInit, lineStatus, lineStatusReq, lineAPIRetry, lineAPIRetryNil, lineCompact, lineTaskStarted,
		lineTaskUpdated, lineTaskNotif, lineTaskProg, lineThinkTok, linePermDenied, lineHookStarted, lineHookResp,
		lineAssistText, lineAssistThink, lineAssistRedac, lineAssistTool, lineAssistOther, lineAssistErr,
		lineAssistAbort, lineUserReplay, lineUserString, lineUserResult, lineUserResBlk, lineResult,
		lineResultAPI, lineResultErr, lineStreamDelta, lineStreamStart, lineStreamMsgD, lineCanUseTool,
		lineHookCB, lineCtlOther, lineCtlCancel, lineCtlResp, lineCtlRespErr, lineRateLimit, lineLifecycle,
		lineUnknownType, lineUnknownSub,
	} {
		lines = append(lines, []byte(l))
	}
	return append(lines, fileLines()...)
}

// fileLines returns the non-blank lines of testdata/cli/*.jsonl and testdata/transcripts/*.jsonl.
func fileLines() [][]byte {
	var lines [][]byte
	for _, dir := range []string{"cli", "transcripts"} {
		files, _ := filepath.Glob(filepath.Join("testdata", dir, "*.jsonl"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			for _, l := range bytes.Split(b, []byte("\n")) {
				if len(bytes.TrimSpace(l)) > 0 {
					lines = append(lines, l)
				}
			}
		}
	}
	return lines
}

// sameMessage compares two decoded messages, Raw included.
func sameMessage(a, b Message) bool {
	return reflect.TypeOf(a) == reflect.TypeOf(b) && reflect.DeepEqual(a, b)
}
