-- The payouts of benchmarks: $1 payouts of key $2, a quarter in each of
-- four statuses, one second apart, 10,000 references; as many again for 100
-- other keys (the key's rows are half the table's); run with triggers off
-- (session_replication_role = replica), constraints on. BenchmarkList and
-- devstack/e2e's BenchmarkPageThroughTheGateway read this file.
INSERT INTO payouts (id, quote_id, key_id, beneficiary_name, beneficiary, chain, crypto_currency,
		fiat_currency, country, crypto_amount, rail, estimated_settlement, status, quote_expires_at, created_at, reference,
		deposit_address, deposit_expires_at, status_at, deposit_tx_hash, completed_at, handover_at, handed_over_at,
		history_statuses, history_times)
	SELECT 'bpo_' || lpad(to_hex(g), 32, '0'), 'bpq_84532_' || lpad(to_hex(g), 32, '0'),
		CASE WHEN g <= $1 THEN $2::text ELSE 'k' || (g % 100) END, 'Ada',
		'{"name":"Ada","iban":"DE89370400440532013000"}', 84532, 'USDC', 'EUR', 'DE', '100', 'sepa_instant', 'PT10S',
		(ARRAY['awaiting_deposit', 'expired', 'processing', 'completed'])[1 + g % 4],
		t + interval '60 seconds', t, 'inv-' || (g % 10000), '0x' || lpad(to_hex(g), 40, '0'), t + interval '30 minutes', t,
		CASE WHEN g % 4 >= 2 THEN '0x' || lpad(to_hex(g), 64, '0') END, CASE WHEN g % 4 = 3 THEN t END,
		CASE WHEN g % 4 >= 2 THEN t END, CASE WHEN g % 4 >= 2 THEN t END,
		CASE g % 4 WHEN 0 THEN '{awaiting_deposit}'::text[] WHEN 1 THEN '{awaiting_deposit,expired}'
			WHEN 2 THEN '{awaiting_deposit,processing}' ELSE '{awaiting_deposit,processing,completed}' END,
		(ARRAY[t, t + interval '1 second', t + interval '2 seconds'])[1:CASE g % 4 WHEN 0 THEN 1 WHEN 3 THEN 3 ELSE 2 END]
	FROM generate_series(1, 2 * $1::int) AS g, LATERAL (SELECT now() - interval '1 year' + (g % $1::int) * interval '1 second' AS t) AS at;
-- Each payout's history, as the worker leaves it (and as its row keeps
-- it): one move awaiting its deposit, two expired or processing, three
-- completed.
INSERT INTO payout_history (payout_id, status, at)
	SELECT p.id, m.status, p.created_at + m.n * interval '1 second'
	FROM payouts p, LATERAL (VALUES (0, 'awaiting_deposit'), (1, CASE p.status WHEN 'expired' THEN 'expired' ELSE 'processing' END),
		(2, 'completed')) AS m (n, status)
	WHERE m.n = 0 OR (m.n = 1 AND p.status <> 'awaiting_deposit') OR (m.n = 2 AND p.status = 'completed');
