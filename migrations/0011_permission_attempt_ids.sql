-- The attempt (activity run, activity, attempt number) that last asked a permission request, so
-- that a retry of the turn finds what an earlier attempt asked even when both carry the same
-- attempt number (the turn was given to a host again after its host was gone).
ALTER TABLE permission_requests ADD COLUMN attempt_id text;
