package main

import "net/http"

// console is the web console that drover serve and drover dev serve at "/", beside the API.
// Nil serves none: "/" then answers that the API is under /api/v1.
func console() http.Handler { return nil }
