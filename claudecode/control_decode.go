package claudecode

import "github.com/drover-run/drover/claudecode/internal/jsonscan"

// The control messages' Go types do not mirror their wire shape (a request's body depends on its
// subtype; a response nests its fields one object down), so their decoders are written by hand.

func (m *ControlRequest) decode(d *jsonscan.Decoder) {
	for more := d.Object(); more; more = d.More() {
		switch string(d.Key()) {
		case "request_id":
			d.Name(&m.RequestID)
		case "request":
			m.decodeRequest(d)
		default:
			d.Skip()
		}
	}
}

// decodeRequest reads the "request" object: its subtype (found by a probe first, wherever it
// stands) says which body type to decode it into.
func (m *ControlRequest) decodeRequest(d *jsonscan.Decoder) {
	m.Subtype, m.CanUseTool, m.HookCallback = "", nil, nil
	if d.Peek() != '{' {
		m.Request = d.Raw()
		return
	}
	start := d.Offset()
	m.Subtype = probeSubtype(d.Rest())
	switch m.Subtype {
	case RequestCanUseTool:
		m.CanUseTool = &CanUseTool{}
		m.CanUseTool.decode(d)
	case RequestHookCallback:
		m.HookCallback = &HookCallback{}
		m.HookCallback.decode(d)
	default:
		d.Skip()
	}
	m.Request = d.Since(start)
}

func (m *ControlResponse) decode(d *jsonscan.Decoder) {
	for more := d.Object(); more; more = d.More() {
		if string(d.Key()) != "response" {
			d.Skip()
			continue
		}
		for more := d.Object(); more; more = d.More() {
			switch string(d.Key()) {
			case "subtype":
				d.Name(&m.Subtype)
			case "request_id":
				d.Name(&m.RequestID)
			case "response":
				m.Response = d.Raw()
			case "error":
				d.Name(&m.Error)
			default:
				d.Skip()
			}
		}
	}
}
