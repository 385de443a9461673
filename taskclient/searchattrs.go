package taskclient

import (
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/drover-run/drover/task"
)

// decodeSearchAttributes fills the summary's fields from the task's search
// attributes; one that is missing or malformed leaves its field empty.
func decodeSearchAttributes(sa *commonpb.SearchAttributes, s *Summary) {
	fields := sa.GetIndexedFields()
	dc := converter.GetDefaultDataConverter()
	get := func(name string, into any) {
		if p, ok := fields[name]; ok {
			_ = dc.FromPayload(p, into)
		}
	}
	var status string
	get(task.SearchStatus, &status)
	// A closed workflow's own status beats what the task last said of itself:
	// a terminated task never got to update its search attribute.
	if status != "" && s.Closed.IsZero() {
		s.Status = status
	}
	get(task.SearchTurns, &s.Turns)
	get(task.SearchCostUSD, &s.CostUSD)
	get(task.SearchModel, &s.Model)
	get(task.SearchWorkspace, &s.Workspace)
}
