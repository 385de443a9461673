package task

import "time"

// DefaultRetention is how long a finished task (completed, cancelled, failed) keeps its rows in
// Postgres after its last activity when neither the task (Params.Retention) nor its host says
// otherwise; then the archive job writes them to the task's archive and deletes them.
const DefaultRetention = 30 * 24 * time.Hour
