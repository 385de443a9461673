-- An account's limit keeps the reset it announced (resets_at) apart from when drover lets the
-- next turn look (blocked_until): the two differ once a limit outlasts its announced reset.
ALTER TABLE accounts ADD COLUMN resets_at timestamptz;
UPDATE accounts SET resets_at = blocked_until WHERE reason IN ('usage_limit', 'rate_limit');
