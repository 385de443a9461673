package claudecode

// validJSON reports whether data is one valid JSON value, surrounded by optional whitespace, with
// exactly the rules of json.Valid (invalid UTF-8 inside strings is accepted; nesting deeper than
// 10000 is not). It is several times faster on long strings, which dominate tool results; a
// differential fuzz test keeps it equal to json.Valid.
func validJSON(data []byte) bool {
	const maxDepth = 10000
	var stack []byte // '{' or '['
	i, n := 0, len(data)
	skipWS := func() {
		for i < n && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
			i++
		}
	}
	for {
		// A value is expected at i.
		skipWS()
		if i >= n {
			return false
		}
		switch c := data[i]; {
		case c == '{' || c == '[':
			if len(stack) >= maxDepth {
				return false
			}
			stack = append(stack, c)
			i++
			skipWS()
			if i < n && (c == '{' && data[i] == '}' || c == '[' && data[i] == ']') {
				i++
				stack = stack[:len(stack)-1]
				break // an empty container is a complete value
			}
			if c == '{' {
				if !validKey(data, &i) {
					return false
				}
			}
			continue
		case c == '"':
			end, ok := validString(data, i)
			if !ok {
				return false
			}
			i = end
		case c == '-' || '0' <= c && c <= '9':
			end, ok := validNumber(data, i)
			if !ok {
				return false
			}
			i = end
		case c == 't':
			if !hasLiteral(data, i, "true") {
				return false
			}
			i += 4
		case c == 'f':
			if !hasLiteral(data, i, "false") {
				return false
			}
			i += 5
		case c == 'n':
			if !hasLiteral(data, i, "null") {
				return false
			}
			i += 4
		default:
			return false
		}
		// A value ended: close containers or move to the next element.
		for {
			skipWS()
			if len(stack) == 0 {
				return i == n
			}
			if i >= n {
				return false
			}
			top := stack[len(stack)-1]
			c := data[i]
			if c == ',' {
				i++
				if top == '{' {
					skipWS()
					if !validKey(data, &i) {
						return false
					}
				}
				break
			}
			if top == '{' && c == '}' || top == '[' && c == ']' {
				i++
				stack = stack[:len(stack)-1]
				continue
			}
			return false
		}
	}
}

// validKey checks `"key" :` at *i (after whitespace) and moves past the colon.
func validKey(data []byte, i *int) bool {
	if *i >= len(data) || data[*i] != '"' {
		return false
	}
	end, ok := validString(data, *i)
	if !ok {
		return false
	}
	for end < len(data) && (data[end] == ' ' || data[end] == '\t' || data[end] == '\n' || data[end] == '\r') {
		end++
	}
	if end >= len(data) || data[end] != ':' {
		return false
	}
	*i = end + 1
	return true
}

// validString checks the string whose opening quote is at i and returns the index after its end.
func validString(data []byte, i int) (int, bool) {
	i++
	for i < len(data) {
		c := data[i]
		switch {
		case c == '"':
			return i + 1, true
		case c == '\\':
			if i+1 >= len(data) {
				return 0, false
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if _, ok := hex4(data[i+2:]); !ok {
					return 0, false
				}
				i += 6
			default:
				return 0, false
			}
		case c < 0x20:
			return 0, false
		default:
			i++
		}
	}
	return 0, false
}

// validNumber checks the number starting at i and returns the index after it.
func validNumber(data []byte, i int) (int, bool) {
	n := len(data)
	digits := func() int {
		s := i
		for i < n && '0' <= data[i] && data[i] <= '9' {
			i++
		}
		return i - s
	}
	if data[i] == '-' {
		i++
	}
	if i >= n {
		return 0, false
	}
	if data[i] == '0' {
		i++
	} else if digits() == 0 {
		return 0, false
	}
	if i < n && data[i] == '.' {
		i++
		if digits() == 0 {
			return 0, false
		}
	}
	if i < n && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < n && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if digits() == 0 {
			return 0, false
		}
	}
	return i, true
}

func hasLiteral(data []byte, i int, lit string) bool {
	return len(data)-i >= len(lit) && string(data[i:i+len(lit)]) == lit
}
