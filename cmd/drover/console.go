package main

import (
	"net/http"

	"github.com/drover-run/drover/console"
)

// consoleHandler is the web console that drover serve and drover dev serve at "/", beside the
// API. Nil would serve none: "/" then answers that the API is under /api/v1.
func consoleHandler() http.Handler { return console.Handler() }
