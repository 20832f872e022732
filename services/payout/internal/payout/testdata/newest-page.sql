SELECT p.id, p.quote_id, p.key_id, p.beneficiary_name, p.beneficiary, p.chain, p.crypto_currency, p.fiat_currency,
	p.country, COALESCE(p.crypto_amount, ''), COALESCE(p.fiat_amount, ''), p.rail, p.estimated_settlement, p.status, p.quote_expires_at,
	p.created_at, COALESCE(p.reference, ''), COALESCE(p.refund_address, ''), p.deposit_address, p.deposit_expires_at,
	COALESCE(p.deposit_tx_hash, ''), COALESCE(p.deposit_amount, ''), p.handover_at, p.handed_over_at, p.completed_at,
	COALESCE(p.failure_reason, ''), COALESCE(p.return_reason, ''), COALESCE(p.return_code, ''), COALESCE(p.provider_code, ''),
	COALESCE(p.sandbox_outcome, ''), COALESCE(p.sandbox_reason, ''), p.status_at, p.provider_missing_at, p.reconcile_checks, p.failures, p.history_statuses, p.history_times, r.refunds FROM payouts p
	CROSS JOIN LATERAL (SELECT COALESCE(json_agg(json_build_object('id', r.id, 'reason', r.reason, 'status', r.status, 'amount', r.amount,
		'crypto_currency', r.crypto_currency, 'chain', r.chain, 'deposit_tx_hash', r.deposit_tx_hash, 'address', COALESCE(r.address, ''),
		'tx_hash', COALESCE(r.tx_hash, ''), 'created_at', r.created_at, 'sent_at', r.sent_at, 'confirmed_at', r.confirmed_at) ORDER BY r.created_at, r.id), '[]') AS refunds
		FROM payout_refunds r WHERE r.payout_id = p.id) r WHERE key_id = $1 ORDER BY p.created_at DESC, p.id DESC LIMIT 101;
