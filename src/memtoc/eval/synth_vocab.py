"""Word banks for the synthetic coding-agent history (``memtoc.eval.synth``).

Each project group has a handful of recurring **topics** (auth, rate limiting, flaky CI, backfills,
...). A topic names its files, tests, functions and commands, and holds a few concrete **issues**:
a symptom the user reports, the error it produces, the cause the agent finds, the fix, and a
decision the user takes. Sessions about a topic work on one issue at a time, and which issue is
"current" changes every few weeks, so the same topic comes back in different periods with
different specifics (a question about one needs the right period).

Everything here is plain data; the text generator fills it into turn templates.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Issue:
    """One concrete problem inside a topic, worked on over a few sessions."""

    title: str
    symptom: str
    error: str
    cause: str
    fix: str
    decision: str
    func: str
    """The function where the bug really is (the user corrects the agent towards it)."""


@dataclass(frozen=True, slots=True)
class Topic:
    """A recurring area of work in a project."""

    key: str
    name: str
    files: tuple[str, ...]
    tests: tuple[str, ...]
    funcs: tuple[str, ...]
    commands: tuple[str, ...]
    issues: tuple[Issue, ...]


WEBAPP: tuple[Topic, ...] = (
    Topic(
        key="auth",
        name="auth / JWT refresh",
        files=(
            "src/auth/session.py",
            "src/auth/tokens.py",
            "src/auth/middleware.py",
            "src/api/login.py",
        ),
        tests=("tests/test_auth.py", "tests/test_tokens.py"),
        funcs=(
            "refresh_token()",
            "issue_token_pair()",
            "verify_access_token()",
            "revoke_session()",
        ),
        commands=("pytest tests/test_auth.py -x", "pytest tests/test_tokens.py -k refresh -q"),
        issues=(
            Issue(
                "refresh token reuse after rotation",
                "users get logged out when two tabs refresh the session at the same time",
                "InvalidTokenError: refresh token already used (jti=8f1c2e)",
                "the old refresh token is revoked before the new pair is committed, so the second tab presents a token that is already burned",
                "commit the new pair and revoke the old token in one transaction and accept the previous token for a short grace window",
                "Let's keep a 10-second reuse grace window instead of strict one-time refresh tokens",
                "refresh_token()",
            ),
            Issue(
                "clock skew on access token expiry",
                "mobile clients get 401s right after login on some Android devices",
                "ExpiredSignatureError: Signature has expired (exp=1704712800, now=1704712741)",
                "verify_access_token() checks exp with zero leeway and the issuing pods drift by up to a minute",
                "pass leeway=30 to jwt.decode and sync the pods with chrony",
                "Let's allow 30 seconds of leeway on exp and nbf, not more",
                "verify_access_token()",
            ),
            Issue(
                "session revocation not propagating",
                "after a password reset the old sessions still work for a few minutes",
                "AssertionError: expected 401 after revoke_session(), got 200",
                "revoked session ids are cached per worker for five minutes and the cache is never invalidated",
                "publish revocations on the Redis channel auth:revoked and drop the per-worker cache entry",
                "Let's move the revocation list to Redis with pub/sub instead of the per-worker LRU",
                "revoke_session()",
            ),
        ),
    ),
    Topic(
        key="ratelimit",
        name="rate limiting",
        files=("src/api/ratelimit.py", "src/api/middleware.py", "src/config/limits.yaml"),
        tests=("tests/test_ratelimit.py", "tests/test_api_limits.py"),
        funcs=(
            "check_rate_limit()",
            "token_bucket_take()",
            "limit_key_for()",
            "RateLimiter.__call__()",
        ),
        commands=(
            "pytest tests/test_ratelimit.py -x -q",
            "locust -f loadtest/limits.py --headless -u 200 -t 60s",
        ),
        issues=(
            Issue(
                "limits not shared across workers",
                "the rate limit lets through about four times the configured requests under gunicorn",
                "AssertionError: 412 requests allowed, expected at most 100",
                "the token buckets live in an in-process dict, so every gunicorn worker has its own bucket",
                "move the buckets to Redis and take tokens with a Lua script so the check is atomic",
                "Let's use Redis for the rate limiter instead of the in-process dict",
                "token_bucket_take()",
            ),
            Issue(
                "API keys limited by IP",
                "customers behind a corporate NAT hit the limit together",
                "HTTP 429 Too Many Requests: limit 100/min exceeded for key 10.20.0.1",
                "limit_key_for() falls back to the client IP when the API key header is lower-case",
                "normalise header names before reading X-Api-Key and key the bucket on the key id",
                "Let's key limits on the API key id and only fall back to IP for anonymous calls",
                "limit_key_for()",
            ),
            Issue(
                "burst handling for webhooks replay",
                "partners replaying webhooks get throttled even though they stay under the hourly quota",
                "RateLimitExceeded: bucket 'partner:acme' empty (capacity=20, refill=0.33/s)",
                "the bucket capacity is too small for legitimate bursts and refill is computed per minute",
                "raise capacity to 120 with the same refill rate and add a Retry-After header",
                "Let's allow bursts of 120 for partner keys and return Retry-After on every 429",
                "check_rate_limit()",
            ),
        ),
    ),
    Topic(
        key="cache",
        name="caching",
        files=("src/cache/layer.py", "src/catalog/views.py", "src/cache/keys.py"),
        tests=("tests/test_cache.py", "tests/test_catalog_views.py"),
        funcs=("cached_query()", "invalidate_product()", "make_cache_key()", "warm_cache()"),
        commands=(
            "pytest tests/test_cache.py -q",
            "redis-cli --scan --pattern 'catalog:*' | wc -l",
        ),
        issues=(
            Issue(
                "stale product prices after update",
                "the product page keeps showing the old price for up to an hour after an edit",
                "AssertionError: assert 19.99 == 24.99 (cached price returned)",
                "invalidate_product() deletes the detail key but not the listing keys that embed the price",
                "tag listing keys with the product id and delete by tag on update",
                "Let's use tag-based invalidation rather than shortening the TTL",
                "invalidate_product()",
            ),
            Issue(
                "cache stampede on cold start",
                "every deploy spikes database CPU to 100 percent for a couple of minutes",
                "psycopg.errors.QueryCanceled: canceling statement due to statement timeout",
                "all workers miss the same hot keys at once and recompute them concurrently",
                "add a per-key lock with early probabilistic refresh and warm the top 500 keys before traffic",
                "Let's warm the cache in the deploy hook instead of adding more read replicas",
                "warm_cache()",
            ),
            Issue(
                "cache keys ignore locale",
                "French users sometimes see English category names",
                "AssertionError: 'Shoes' != 'Chaussures'",
                "make_cache_key() builds keys from the path only and drops the Accept-Language variant",
                "include the resolved locale and currency in the key",
                "Let's version cache keys with a prefix so we can flush them all at once next time",
                "make_cache_key()",
            ),
        ),
    ),
    Topic(
        key="payments",
        name="payment webhooks",
        files=("src/payments/webhooks.py", "src/payments/stripe_client.py", "src/orders/fulfil.py"),
        tests=("tests/test_webhooks.py", "tests/test_orders.py"),
        funcs=(
            "handle_stripe_event()",
            "verify_signature()",
            "mark_order_paid()",
            "enqueue_fulfilment()",
        ),
        commands=(
            "pytest tests/test_webhooks.py -x",
            "stripe listen --forward-to localhost:8000/webhooks/stripe",
        ),
        issues=(
            Issue(
                "duplicate fulfilment on webhook retries",
                "some customers get two shipments for one order",
                'IntegrityError: duplicate key value violates unique constraint "shipments_order_id_key"',
                "Stripe retries the event when we answer slowly and handle_stripe_event() is not idempotent",
                "store processed event ids in a table with a unique constraint and return 200 for repeats",
                "Let's make webhook handling idempotent on the Stripe event id and ack before fulfilment",
                "handle_stripe_event()",
            ),
            Issue(
                "signature verification fails behind the proxy",
                "all webhooks fail with 400 since we moved behind the new load balancer",
                "SignatureVerificationError: No signatures found matching the expected signature for payload",
                "the proxy re-encodes the JSON body, so verify_signature() sees different bytes than Stripe signed",
                "verify against the raw request body and disable body rewriting on the /webhooks route",
                "Let's verify signatures on the raw body and never parse JSON before verification",
                "verify_signature()",
            ),
            Issue(
                "refunds not reflected on orders",
                "refunded orders still show as paid in the admin",
                "KeyError: 'charge.refunded'",
                "the event dispatch table has no handler for charge.refunded, so those events are dropped",
                "add a refund handler that updates the order state and writes an audit entry",
                "Let's log and alert on any unhandled Stripe event type instead of dropping it silently",
                "mark_order_paid()",
            ),
        ),
    ),
    Topic(
        key="migrations",
        name="database migrations",
        files=("migrations/versions/", "src/db/models.py", "alembic.ini"),
        tests=("tests/test_migrations.py", "tests/test_models.py"),
        funcs=("upgrade()", "downgrade()", "backfill_user_emails()", "create_index_concurrently()"),
        commands=(
            "alembic upgrade head",
            "alembic downgrade -1",
            "pytest tests/test_migrations.py -q",
        ),
        issues=(
            Issue(
                "migration locks the orders table",
                "the last deploy froze checkout for three minutes during the migration",
                'LockNotAvailable: canceling statement due to lock timeout on relation "orders"',
                "the migration adds a NOT NULL column with a default and an index in one transaction, which rewrites and locks the table",
                "split it: add the nullable column, backfill in batches, then add the constraint NOT VALID and validate",
                "Let's require CREATE INDEX CONCURRENTLY and batched backfills for every table over a million rows",
                "create_index_concurrently()",
            ),
            Issue(
                "downgrade loses data",
                "rolling back the staging release wiped the preferences column",
                "AssertionError: 0 rows with preferences after downgrade, expected 1532",
                "downgrade() drops the new column instead of copying the data back to the old one",
                "copy data back before dropping and add a round-trip test for every migration",
                "Let's test upgrade, downgrade and upgrade again in CI for each new migration",
                "downgrade()",
            ),
            Issue(
                "email backfill times out",
                "the email normalisation migration never finishes on production-sized data",
                "psycopg.errors.QueryCanceled: canceling statement due to statement timeout (300s)",
                "backfill_user_emails() updates all rows in one statement",
                "backfill in batches of 5000 keyed on id with a sleep between batches",
                "Let's run large backfills as a separate job, not inside the Alembic migration",
                "backfill_user_emails()",
            ),
        ),
    ),
)

INFRA: tuple[Topic, ...] = (
    Topic(
        key="ci",
        name="flaky CI",
        files=(".github/workflows/ci.yml", "tests/conftest.py", "scripts/ci/run_tests.sh"),
        tests=("tests/integration/test_queue.py", "tests/integration/test_search.py"),
        funcs=("wait_for_queue()", "db_fixture()", "retry_on_conflict()", "start_test_services()"),
        commands=(
            "gh run view --log-failed",
            "pytest tests/integration -x -p no:randomly",
            "gh run rerun --failed",
        ),
        issues=(
            Issue(
                "integration tests race the queue container",
                "the integration job fails about one run in five with a connection error",
                "ConnectionRefusedError: [Errno 111] Connection refused (rabbitmq:5672)",
                "the tests start before RabbitMQ is ready; the compose healthcheck only checks the port",
                "add a real healthcheck with rabbitmq-diagnostics and make wait_for_queue() poll with a timeout",
                "Let's gate the integration job on service healthchecks instead of adding sleeps",
                "wait_for_queue()",
            ),
            Issue(
                "test order dependence",
                "test_search passes alone but fails in the full suite",
                "AssertionError: expected 3 hits, got 5",
                "db_fixture() is session-scoped and another test leaves rows behind",
                "make the fixture function-scoped with a transaction rollback",
                "Let's run the suite in random order on CI so order dependence shows up early",
                "db_fixture()",
            ),
            Issue(
                "cache poisoning between CI runs",
                "CI goes red on main right after a dependency bump, then green on rerun",
                "ModuleNotFoundError: No module named 'pydantic_core._pydantic_core'",
                "the pip cache key ignores the Python version, so a wheel for 3.11 is restored on 3.12",
                "include the Python version and the lockfile hash in the cache key",
                "Let's key every CI cache on the lockfile hash and the runner image",
                "start_test_services()",
            ),
        ),
    ),
    Topic(
        key="docker",
        name="Docker builds",
        files=("Dockerfile", "docker-compose.yml", ".dockerignore", "scripts/build_image.sh"),
        tests=("tests/test_image.py",),
        funcs=("build_image()", "push_image()", "tag_for_commit()"),
        commands=(
            "docker build -t webapp:dev .",
            "docker compose up -d --build",
            "docker image ls webapp",
        ),
        issues=(
            Issue(
                "image too large",
                "the API image grew to 2.3 GB and deploys take ages to pull",
                "Error: failed to push: layer exceeds registry size limit",
                "the build context includes node_modules and the test data, and build tools stay in the final stage",
                "use a multi-stage build, a slim runtime base and a stricter .dockerignore",
                "Let's switch to a multi-stage build on python:3.12-slim for all services",
                "build_image()",
            ),
            Issue(
                "builds never hit the layer cache",
                "every CI build reinstalls all dependencies and takes twelve minutes",
                "#12 [deps 3/5] RUN pip install -r requirements.txt  412.3s",
                "the COPY . . comes before the dependency install, so any source change invalidates the layer",
                "copy the lockfile first, install, then copy the source; enable the registry cache backend",
                "Let's use BuildKit with a registry cache instead of caching layers on the runner",
                "tag_for_commit()",
            ),
            Issue(
                "arm64 image crashes on start",
                "the new Graviton nodes crash-loop the worker pods",
                "exec /usr/local/bin/python: exec format error",
                "push_image() only builds linux/amd64 and the manifest list is missing",
                "build with buildx for linux/amd64 and linux/arm64 and push a manifest list",
                "Let's publish multi-arch images for every service from now on",
                "push_image()",
            ),
        ),
    ),
    Topic(
        key="deploy",
        name="Kubernetes deploys",
        files=("k8s/api/deployment.yaml", "k8s/api/hpa.yaml", "helm/values-prod.yaml"),
        tests=("tests/test_manifests.py",),
        funcs=("render_manifests()", "rollout_status()", "check_readiness()"),
        commands=(
            "kubectl rollout status deploy/api -n prod",
            "helm diff upgrade api ./helm -f helm/values-prod.yaml",
            "kubectl get pods -n prod",
        ),
        issues=(
            Issue(
                "pods killed during rollout",
                "we drop requests for about twenty seconds on every deploy",
                "upstream connect error or disconnect/reset before headers. reset reason: connection termination",
                "the pods get SIGTERM while still in the endpoints list and there is no preStop delay",
                "add a preStop sleep of 10 s and set terminationGracePeriodSeconds to 40",
                "Let's require preStop hooks and readiness probes in every deployment",
                "check_readiness()",
            ),
            Issue(
                "HPA flapping",
                "the api deployment scales between 4 and 20 replicas every few minutes",
                "Warning FailedGetResourceMetric: unable to get metrics for resource cpu",
                "the CPU requests are tiny, so utilisation percentages swing wildly, and there is no scale-down window",
                "set realistic CPU requests and a 300 s stabilisation window for scale down",
                "Let's scale the api on requests per second from Prometheus instead of CPU",
                "render_manifests()",
            ),
            Issue(
                "OOMKilled workers",
                "the worker pods restart a few times a day",
                "Last State: Terminated Reason: OOMKilled Exit Code: 137",
                "the memory limit is 512Mi but the PDF renderer peaks at 900Mi",
                "raise the limit to 1Gi and render PDFs in a separate queue with concurrency 2",
                "Let's split PDF rendering into its own deployment with its own limits",
                "rollout_status()",
            ),
        ),
    ),
    Topic(
        key="terraform",
        name="Terraform and cloud infra",
        files=(
            "terraform/modules/rds/main.tf",
            "terraform/envs/prod/main.tf",
            "terraform/modules/vpc/outputs.tf",
        ),
        tests=("tests/test_tf_plan.py",),
        funcs=("plan_env()", "apply_env()", "import_resource()"),
        commands=(
            "terraform plan -out plan.tfplan",
            "terraform apply plan.tfplan",
            "terraform state list",
        ),
        issues=(
            Issue(
                "state lock stuck",
                "terraform plan hangs and then fails for everyone on the team",
                "Error acquiring the state lock: ConditionalCheckFailedException",
                "a cancelled CI job left its lock in the DynamoDB table",
                "force-unlock with the lock id after checking no apply is running, and add a job timeout",
                "Let's only run terraform apply from CI, never from laptops",
                "apply_env()",
            ),
            Issue(
                "RDS replacement in plan",
                "the plan wants to destroy and recreate the production database",
                "# aws_db_instance.main must be replaced (forces replacement: engine_version)",
                "the module pins engine_version 15.4 while AWS already auto-upgraded the instance to 15.5",
                "set allow_major_version_upgrade false, ignore minor version changes and update the pin",
                "Let's add prevent_destroy to every stateful resource",
                "plan_env()",
            ),
            Issue(
                "drift in security groups",
                "someone opened port 22 on the bastion by hand and the plan keeps reverting it",
                '~ resource "aws_security_group_rule" "ssh" { cidr_blocks = ["0.0.0.0/0"] -> ["10.0.0.0/8"] }',
                "the manual change was never imported and the nightly plan fights it",
                "import the rule, restrict it to the VPN range and enable drift alerts",
                "Let's run a nightly drift plan and post the diff to the infra channel",
                "import_resource()",
            ),
        ),
    ),
    Topic(
        key="monitoring",
        name="monitoring and alerts",
        files=("monitoring/alerts.yaml", "monitoring/dashboards/api.json", "src/metrics.py"),
        tests=("tests/test_alert_rules.py",),
        funcs=("record_latency()", "export_metrics()", "alert_rule_for()"),
        commands=(
            "promtool check rules monitoring/alerts.yaml",
            "curl -s localhost:9090/api/v1/alerts | jq '.data.alerts | length'",
        ),
        issues=(
            Issue(
                "noisy latency alert",
                "the p99 latency alert pages on-call several times a night for nothing",
                "ALERT ApiLatencyHigh firing: p99 1.8s > 1.5s for 2m",
                "the alert uses a two-minute window on a histogram with few requests at night",
                "use a 15-minute window with a minimum request rate and alert on burn rate",
                "Let's move paging alerts to SLO burn rates and keep the rest as tickets",
                "alert_rule_for()",
            ),
            Issue(
                "metrics cardinality explosion",
                "Prometheus memory doubled this week",
                'err="out of memory" series=4812334 head_chunks=9120333',
                "record_latency() labels requests with the raw path, including ids",
                "label with the route template instead of the path and drop the user_agent label",
                "Let's review every new metric label in code review for cardinality",
                "record_latency()",
            ),
            Issue(
                "missing metrics from workers",
                "the worker dashboard is empty since the last deploy",
                'Get "http://10.2.3.4:9100/metrics": dial tcp 10.2.3.4:9100: connect: connection refused',
                "export_metrics() starts the HTTP server only in the web process, not in the workers",
                "start the exporter in the worker entrypoint and add the port to the pod spec",
                "Let's use the multiprocess collector everywhere so workers and web behave the same",
                "export_metrics()",
            ),
        ),
    ),
)

MLPIPE: tuple[Topic, ...] = (
    Topic(
        key="backfill",
        name="data pipeline backfills",
        files=("pipelines/events_daily.py", "pipelines/backfill.py", "dags/events_dag.py"),
        tests=("tests/test_backfill.py", "tests/test_events_daily.py"),
        funcs=("backfill_range()", "load_partition()", "dedupe_events()", "write_parquet()"),
        commands=(
            "python -m pipelines.backfill --start 2023-10-01 --end 2023-12-31",
            "airflow dags backfill events_daily -s 2023-11-01 -e 2023-11-30",
            "pytest tests/test_backfill.py -q",
        ),
        issues=(
            Issue(
                "backfill double counts events",
                "the November revenue numbers doubled after the backfill",
                "AssertionError: 2,418,220 rows, expected 1,209,110",
                "backfill_range() appends partitions instead of overwriting them",
                "write with partition overwrite mode and dedupe on event_id before writing",
                "Let's make every daily job idempotent with dynamic partition overwrite",
                "backfill_range()",
            ),
            Issue(
                "timezone shift in daily partitions",
                "the daily totals are off by a few percent compared with the dashboard",
                "AssertionError: partition 2023-11-05 has 3,104 events dated 2023-11-04",
                "load_partition() buckets by local time while the source timestamps are UTC",
                "partition by UTC date everywhere and convert only in the reporting layer",
                "Let's store and partition everything in UTC and document it in the pipeline README",
                "load_partition()",
            ),
            Issue(
                "backfill runs out of memory",
                "the three-month backfill dies after a few days of data",
                "MemoryError: Unable to allocate 11.2 GiB for an array with shape (1503238553,)",
                "dedupe_events() loads the whole range into one DataFrame",
                "process one day at a time and dedupe with a sorted merge",
                "Let's backfill day by day with a checkpoint file so restarts resume",
                "dedupe_events()",
            ),
        ),
    ),
    Topic(
        key="training",
        name="model training configs",
        files=("configs/train_base.yaml", "train.py", "src/model/optim.py", "configs/sweep.yaml"),
        tests=("tests/test_config.py", "tests/test_train_step.py"),
        funcs=("build_optimizer()", "load_config()", "train_step()", "lr_schedule()"),
        commands=(
            "python train.py --config configs/train_base.yaml --max-steps 200",
            "pytest tests/test_config.py -q",
            "wandb sweep configs/sweep.yaml",
        ),
        issues=(
            Issue(
                "loss goes NaN after warmup",
                "the base run diverges around step 3000 every time",
                "FloatingPointError: loss is nan at step 3012 (lr=0.0012)",
                "lr_schedule() applies warmup twice, so the peak learning rate is double what the config says",
                "fix the schedule, clip gradients at 1.0 and enable bf16 instead of fp16",
                "Let's cap the peak learning rate at 6e-4 for the base config",
                "lr_schedule()",
            ),
            Issue(
                "config overrides silently ignored",
                "changing batch_size on the command line has no effect",
                "AssertionError: cfg.batch_size == 64, expected 256",
                "load_config() merges the YAML after the CLI overrides, so the file wins",
                "merge defaults, then the file, then CLI overrides, and fail on unknown keys",
                "Let's validate configs with pydantic and reject unknown keys",
                "load_config()",
            ),
            Issue(
                "weight decay applied to layer norms",
                "the fine-tuned model is worse than the baseline on the long documents set",
                "eval/long_docs F1 0.712 vs baseline 0.741",
                "build_optimizer() puts every parameter in one group, including biases and norms",
                "exclude biases and LayerNorm weights from weight decay",
                "Let's keep weight decay at 0.1 but only on matrix weights",
                "build_optimizer()",
            ),
        ),
    ),
    Topic(
        key="export",
        name="ONNX export and serving",
        files=("export/to_onnx.py", "serving/app.py", "serving/runtime.py"),
        tests=("tests/test_export.py", "tests/test_serving.py"),
        funcs=("export_onnx()", "load_session()", "predict_batch()"),
        commands=(
            "python export/to_onnx.py --checkpoint runs/best.pt --opset 17",
            "pytest tests/test_export.py -x",
            "python -m serving.bench --batch 32",
        ),
        issues=(
            Issue(
                "dynamic axes lost in export",
                "serving fails for any batch size other than 1",
                "onnxruntime.capi.onnxruntime_pybind11_state.InvalidArgument: Got invalid dimensions for input: input_ids Got: 32 Expected: 1",
                "export_onnx() does not declare dynamic_axes for the batch and sequence dimensions",
                "declare dynamic axes for batch and sequence and add a test with two batch sizes",
                "Let's export with opset 17 and test batch sizes 1 and 32 in CI",
                "export_onnx()",
            ),
            Issue(
                "numerical mismatch after export",
                "the ONNX model's scores differ from PyTorch in the third decimal",
                "AssertionError: max abs diff 0.0183 > atol 1e-3",
                "the exporter traces the model in training mode, so dropout is active",
                "call model.eval() before export and compare on 100 fixed samples",
                "Let's gate releases on an export parity test with atol 1e-3",
                "export_onnx()",
            ),
            Issue(
                "slow cold start in serving",
                "the first requests after a deploy take over ten seconds",
                "WARNING serving.runtime: first inference took 11.4s",
                "load_session() builds the session lazily on the first request with all graph optimisations",
                "load the session at startup, save the optimised model once and reuse it",
                "Let's ship the pre-optimised ONNX model and warm it up in the readiness probe",
                "load_session()",
            ),
        ),
    ),
    Topic(
        key="features",
        name="feature store and data validation",
        files=("features/definitions.py", "features/validate.py", "features/store.py"),
        tests=("tests/test_features.py", "tests/test_validate.py"),
        funcs=("compute_features()", "validate_schema()", "materialize()"),
        commands=(
            "python -m features.materialize --date 2024-01-15",
            "pytest tests/test_validate.py -q",
            "great_expectations checkpoint run features",
        ),
        issues=(
            Issue(
                "training-serving skew",
                "the online model is noticeably worse than offline evaluation suggests",
                "SkewDetected: feature 'days_since_signup' mean offline 212.4 vs online 0.0",
                "compute_features() uses the event time offline but the request time online, and a null becomes 0",
                "share one feature function between both paths and treat nulls explicitly",
                "Let's compute features in one shared library used by both training and serving",
                "compute_features()",
            ),
            Issue(
                "schema change breaks validation",
                "the nightly validation fails after the upstream team renamed a column",
                "SchemaError: column 'user_country' not found (available: ['user_id', 'country_code', ...])",
                "validate_schema() compares column names exactly and the upstream contract is not versioned",
                "map the renamed column and pin a versioned data contract with the upstream team",
                "Let's require a data contract and a deprecation window for upstream schema changes",
                "validate_schema()",
            ),
            Issue(
                "materialisation misses late events",
                "yesterday's features are missing about two percent of users",
                "AssertionError: 48,102 users materialised, expected 49,180",
                "materialize() runs at 00:30 but late events keep arriving until 02:00",
                "run at 03:00 and re-materialise the previous day once more",
                "Let's materialise with a three-hour lateness allowance",
                "materialize()",
            ),
        ),
    ),
)

TOPIC_GROUPS: dict[str, tuple[Topic, ...]] = {"webapp": WEBAPP, "infra": INFRA, "mlpipe": MLPIPE}
"""Topic banks by project name; other project names get a bank by their position."""

BRANCH_PREFIXES: tuple[str, ...] = ("fix", "feat", "chore", "refactor")

PYTEST_SUFFIXES: tuple[str, ...] = (
    "happy_path",
    "rejects_invalid_input",
    "handles_timeout",
    "is_idempotent",
    "concurrent_access",
    "round_trip",
    "empty_input",
    "large_payload",
    "retries_on_failure",
    "logs_warning",
)
