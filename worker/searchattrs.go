package worker

import (
	"context"
	"fmt"
	"sort"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/drover-run/drover/workflows"
)

// RegisterSearchAttributes adds the task workflow's search attributes that the
// namespace lacks. Attributes already present are left alone.
func RegisterSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	have, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("listing search attributes: %w", err)
	}
	req := &operatorservice.AddSearchAttributesRequest{Namespace: namespace}
	for name, typ := range workflows.SearchAttributes() {
		if _, ok := have.GetCustomAttributes()[name]; ok {
			continue
		}
		if req.SearchAttributes == nil {
			req.SearchAttributes = map[string]enumspb.IndexedValueType{}
		}
		req.SearchAttributes[name] = typ
	}
	if len(req.SearchAttributes) == 0 {
		return nil
	}
	if _, err := c.OperatorService().AddSearchAttributes(ctx, req); err != nil {
		return fmt.Errorf("adding search attributes: %w", err)
	}
	return nil
}

// searchAttributeHint lists drover's search attributes as NAME=Type for an
// operator to create by hand.
func searchAttributeHint() string {
	var parts []string
	for name, t := range workflows.SearchAttributes() {
		parts = append(parts, name+"="+strings.TrimPrefix(t.String(), "IndexedValueType"))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
