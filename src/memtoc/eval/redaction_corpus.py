"""The redaction corpus of ``memtoc eval redaction``: secret kinds and clean look-alikes.

Every **kind** is a credential people leak into coding sessions — a token format, a password in a
URL, a header, a command line, an assignment in a config, a key file, something base64-encoded —
with a generator of synthetic secrets of the right shape (random characters: none is real) and
the lines it typically appears in. ``secret`` is the part that must not be stored (for a private
key, a line of its body). The **clean** look-alikes are what sits next to secrets and is not one:
placeholders, references to variables, masked examples, hashes, ids, prose about passwords. The
corpus is generated from a seed, so a run is reproducible; the code is the corpus (it ships with
memtoc, no data file).
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import uuid
from collections.abc import Callable
from dataclasses import dataclass

ALNUM = string.ascii_letters + string.digits
RUN = ALNUM + "_-"
HEX = "0123456789abcdef"
UPPER_DIGITS = string.ascii_uppercase + string.digits
B64 = ALNUM + "+/"
PUNCT = "!#%*+-.:=?@^_~"


def rand(rng: random.Random, alphabet: str, n: int) -> str:
    """``n`` characters of ``alphabet`` with a digit and, when the alphabet has them, an upper
    and a lower case letter (what a real token has)."""
    while True:
        s = "".join(rng.choice(alphabet) for _ in range(n))
        if not any(c.isdigit() for c in s):
            continue
        if any(c.isupper() for c in alphabet) and not any(c.isupper() for c in s):
            continue
        if any(c.islower() for c in alphabet) and not any(c.islower() for c in s):
            continue
        return s


def password(rng: random.Random) -> str:
    return rand(rng, ALNUM, 10) + rng.choice(PUNCT) + rand(rng, ALNUM, 3)


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


@dataclass(frozen=True, slots=True)
class Sample:
    """One planted secret: its kind, the line it is in, and the part that must not be stored."""

    kind: str
    family: str
    line: str
    secret: str


@dataclass(frozen=True, slots=True)
class Kind:
    name: str
    family: str
    make: Callable[[random.Random], tuple[str, str]]
    """rng → (the value put into the templates, the part that must not be stored)."""
    templates: tuple[str, ...]

    def samples(self, rng: random.Random) -> list[Sample]:
        out = []
        for template in self.templates:
            value, secret = self.make(rng)
            out.append(Sample(self.name, self.family, template.format(s=value), secret))
        return out


def _same(gen: Callable[[random.Random], str]) -> Callable[[random.Random], tuple[str, str]]:
    def make(rng: random.Random) -> tuple[str, str]:
        value = gen(rng)
        return value, value

    return make


def _pem(label: str, lines: int = 6) -> Callable[[random.Random], tuple[str, str]]:
    def make(rng: random.Random) -> tuple[str, str]:
        body = [b64(rng.randbytes(48)) for _ in range(lines)]
        pem = f"-----BEGIN {label}-----\n" + "\n".join(body) + f"\n-----END {label}-----"
        return pem, body[1]

    return make


def _jwt(rng: random.Random) -> str:
    def part(obj: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    sig = base64.urlsafe_b64encode(rng.randbytes(32)).decode().rstrip("=")
    claims = {"sub": str(rng.randrange(10**6)), "iat": 1716000000, "role": "admin"}
    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part(claims)}.{sig}"


def _discord(rng: random.Random) -> str:
    uid = base64.urlsafe_b64encode(str(rng.randrange(10**17, 10**19)).encode()).decode()
    return f"{uid.rstrip('=')}.{rand(rng, RUN, 6)}.{rand(rng, RUN, 38)}"


def _docker_auth(rng: random.Random) -> tuple[str, str]:
    value = b64(f"ci-bot:{password(rng)}".encode())
    return value, value


def _b64_of(prefix: str, alphabet: str, n: int) -> Callable[[random.Random], tuple[str, str]]:
    def make(rng: random.Random) -> tuple[str, str]:
        value = b64((prefix + rand(rng, alphabet, n)).encode())
        return value, value

    return make


def _b64_pem(rng: random.Random) -> tuple[str, str]:
    pem, _ = _pem("PRIVATE KEY")(rng)
    value = b64(pem.encode())
    return value, value[:80]


def _dockerconfigjson(rng: random.Random) -> tuple[str, str]:
    inner = b64(f"deploy:{password(rng)}".encode())
    value = b64(json.dumps({"auths": {"ghcr.io": {"auth": inner}}}).encode())
    return value, value


def _basic(rng: random.Random) -> tuple[str, str]:
    value = b64(f"admin:{password(rng)}".encode())
    return value, value


def _gcp(rng: random.Random) -> tuple[str, str]:
    body = [b64(rng.randbytes(48)) for _ in range(5)]
    key = "-----BEGIN PRIVATE KEY-----\\n" + "\\n".join(body) + "\\n-----END PRIVATE KEY-----\\n"
    return key, body[1]


def _token(prefix: str, alphabet: str, n: int) -> Callable[[random.Random], tuple[str, str]]:
    return _same(lambda rng: prefix + rand(rng, alphabet, n))


def _pw() -> Callable[[random.Random], tuple[str, str]]:
    return _same(password)


KINDS: tuple[Kind, ...] = (
    # -- AI and developer platform tokens ------------------------------------------------------------
    Kind(
        "openai_project_key",
        "token",
        _token("sk-proj-", RUN, 64),
        ("export OPENAI_API_KEY={s}", "client = OpenAI(api_key='{s}')"),
    ),
    Kind(
        "openai_legacy_key",
        "token",
        _token("sk-", ALNUM, 48),
        ('openai.api_key = "{s}"', "I pasted {s} into the notebook by mistake"),
    ),
    Kind(
        "openai_service_account_key",
        "token",
        _token("sk-svcacct-", RUN, 64),
        ("WARN retrying with key={s} status=429", "OPENAI_KEY: {s}"),
    ),
    Kind(
        "anthropic_key",
        "token",
        _token("sk-ant-api03-", RUN, 93),
        ("ANTHROPIC_API_KEY={s}", "the SDK says {s} is invalid"),
    ),
    Kind(
        "github_classic_pat",
        "token",
        _token("ghp_", ALNUM, 36),
        (
            "git remote set-url origin https://x:{s}@github.com/acme/app.git",
            "gh auth login --with-token <<< {s}",
        ),
    ),
    Kind(
        "github_oauth_token",
        "token",
        _token("gho_", ALNUM, 36),
        ("~/.config/gh/hosts.yml: oauth_token: {s}", "Authorization: token {s}"),
    ),
    Kind(
        "github_app_token",
        "token",
        _token("ghs_", ALNUM, 36),
        ("the installation token {s} expires in an hour", "GH_TOKEN={s} gh pr list"),
    ),
    Kind(
        "github_fine_grained_pat",
        "token",
        _same(lambda rng: "github_pat_" + rand(rng, ALNUM, 22) + "_" + rand(rng, ALNUM, 59)),
        ("GITHUB_TOKEN={s}", "use {s} for the release workflow"),
    ),
    Kind(
        "gitlab_pat",
        "token",
        _token("glpat-", RUN, 20),
        (
            "curl --header 'PRIVATE-TOKEN: {s}' https://gitlab.com/api/v4/projects",
            "glab auth login --token {s}",
        ),
    ),
    Kind(
        "gitlab_runner_token",
        "token",
        _token("glrt-", RUN, 20),
        ("gitlab-runner register --token {s}", "runner token: {s}"),
    ),
    Kind(
        "huggingface_token",
        "token",
        _token("hf_", ALNUM, 34),
        ("huggingface-cli login --token {s}", "HF_TOKEN={s} python train.py"),
    ),
    Kind(
        "npm_token",
        "token",
        _token("npm_", ALNUM, 36),
        ("npm config set //registry.npmjs.org/:_authToken {s}", "NPM_TOKEN {s} was revoked"),
    ),
    Kind(
        "pypi_token",
        "token",
        _token("pypi-AgEIcHlwaS5vcmc", RUN, 60),
        ("twine upload -u __token__ -p {s} dist/*", "[pypi]\n  username = __token__\n  pass = {s}"),
    ),
    Kind(
        "dockerhub_pat",
        "token",
        _token("dckr_pat_", RUN, 27),
        ("echo {s} | docker login -u acmebot --password-stdin", "DOCKERHUB_PAT {s}"),
    ),
    Kind(
        "groq_key",
        "token",
        _token("gsk_", ALNUM, 52),
        ("client = Groq(api='{s}')", "GROQ {s} rate limited"),
    ),
    Kind(
        "replicate_token",
        "token",
        _token("r8_", ALNUM, 37),
        ("export REPLICATE={s}", "replicate.Client('{s}')"),
    ),
    Kind("xai_key", "token", _token("xai-", ALNUM, 80), ("grok call with {s} failed", "XAI={s}")),
    Kind(
        "perplexity_key",
        "token",
        _token("pplx-", ALNUM, 48),
        ("pplx = Perplexity('{s}')", "key {s} expired"),
    ),
    Kind(
        "linear_api_key",
        "token",
        _token("lin_api_", ALNUM, 40),
        ("LinearClient('{s}')", "linear key {s}"),
    ),
    # -- cloud ------------------------------------------------------------------------------------
    Kind(
        "aws_access_key_id",
        "cloud",
        _token("AKIA", UPPER_DIGITS, 16),
        ("aws configure set aws_access_key_id {s}", "[default]\naws_access_key_id = {s}"),
    ),
    Kind(
        "aws_session_key_id",
        "cloud",
        _token("ASIA", UPPER_DIGITS, 16),
        ("the STS call returned AccessKeyId {s}", "AWS_ACCESS_KEY_ID={s}"),
    ),
    Kind(
        "aws_secret_access_key",
        "cloud",
        _token("", B64, 40),
        ("aws_secret_access_key = {s}", "AWS_SECRET_ACCESS_KEY={s}"),
    ),
    Kind(
        "google_api_key",
        "cloud",
        _token("AIza", RUN, 35),
        (
            "https://maps.googleapis.com/maps/api/geocode/json?address=x&key={s}",
            "GOOGLE_API_KEY: {s}",
        ),
    ),
    Kind(
        "azure_storage_key",
        "cloud",
        _same(lambda rng: b64(rng.randbytes(64))),
        (
            "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={s};EndpointSuffix=core.windows.net",
            "az storage blob list --account-key {s}",
        ),
    ),
    Kind(
        "azure_sas_token",
        "cloud",
        _same(lambda rng: rand(rng, ALNUM, 40) + "%3D"),
        (
            "https://acme.blob.core.windows.net/b/db.bak?sv=2022-11-02&sp=r&sig={s}",
            "--sas 'sv=2021-08-06&sr=c&sig={s}'",
        ),
    ),
    Kind(
        "digitalocean_token",
        "cloud",
        _same(lambda rng: "dop_v1_" + rand(rng, HEX, 64)),
        ("doctl auth init --access-token {s}", 'token = "{s}"'),
    ),
    Kind(
        "heroku_key",
        "cloud",
        _token("HRKU-AA", RUN, 58),
        ("heroku printed {s}", "HEROKU {s} rotated"),
    ),
    Kind(
        "databricks_token",
        "cloud",
        _same(lambda rng: "dapi" + rand(rng, HEX, 32)),
        ("databricks configure --aad {s}", "spark.conf.set('auth', '{s}')"),
    ),
    Kind("vault_token", "cloud", _token("hvs.", RUN, 95), ("vault login {s}", "VAULT {s} expired")),
    Kind(
        "doppler_token",
        "cloud",
        _same(lambda rng: "dp.st.prd." + rand(rng, ALNUM, 43)),
        ("doppler run --token {s} -- npm start", "service token {s}"),
    ),
    Kind(
        "supabase_token",
        "cloud",
        _same(lambda rng: "sbp_" + rand(rng, HEX, 40)),
        ("supabase login --token {s}", "supabase call with {s} returned 401"),
    ),
    Kind(
        "new_relic_key",
        "cloud",
        _token("NRAK-", UPPER_DIGITS, 27),
        ("newrelic:\n  license: {s}", "curl -H 'Api-Key:{s}' https://api.newrelic.com"),
    ),
    Kind(
        "grafana_token",
        "cloud",
        _same(lambda rng: "glsa_" + rand(rng, ALNUM, 32) + "_" + rand(rng, HEX, 8)),
        ("grafana_sa = '{s}'", "curl -u sa:{s} http://grafana:3000/api"),
    ),
    Kind(
        "sentry_token",
        "cloud",
        _token("sntrys_eyJpYXQiOjE3MDk", ALNUM, 70),
        ("sentry-cli --auth {s} releases new 1.4", "SENTRY {s}"),
    ),
    Kind(
        "atlassian_token",
        "cloud",
        _same(lambda rng: "ATATT3xFfGF0" + rand(rng, RUN, 170) + "=" + rand(rng, HEX.upper(), 8)),
        ("curl -u me@acme.dev:{s} https://acme.atlassian.net/rest/api/3", "jira api: {s}"),
    ),
    Kind(
        "postman_key",
        "cloud",
        _same(lambda rng: "PMAK-" + rand(rng, HEX, 24) + "-" + rand(rng, HEX, 34)),
        ("postman collection run 1 --api {s}", "monitor used {s}"),
    ),
    Kind(
        "age_secret_key",
        "cloud",
        _token("AGE-SECRET-KEY-1", "023456789ACDEFGHJKLMNPQRSTUVWXYZ", 58),
        ("# public key: age1qy\n{s}", "sops uses {s}"),
    ),
    # -- payments, messaging, chat ------------------------------------------------------------------
    Kind(
        "stripe_secret_key",
        "payments",
        _token("sk_live_", ALNUM, 24),
        ("stripe.api_key = '{s}'", "STRIPE_SECRET_KEY={s}"),
    ),
    Kind(
        "stripe_restricted_key",
        "payments",
        _token("rk_live_", ALNUM, 24),
        ("the restricted key {s} can only read charges", "STRIPE_RK={s}"),
    ),
    Kind(
        "stripe_webhook_secret",
        "payments",
        _token("whsec_", ALNUM, 32),
        ("stripe listen printed {s}", "endpoint_secret = '{s}'"),
    ),
    Kind(
        "square_token", "payments", _token("EAAA", RUN, 40), ("Client(access='{s}')", "SQUARE {s}")
    ),
    Kind(
        "shopify_token",
        "payments",
        _same(lambda rng: "shpat_" + rand(rng, HEX, 32)),
        ("X-Shopify-Access-Token: {s}", "accessToken: '{s}'"),
    ),
    Kind(
        "sendgrid_key",
        "messaging",
        _same(lambda rng: "SG." + rand(rng, RUN, 22) + "." + rand(rng, RUN, 43)),
        ("SENDGRID_API_KEY={s}", "sg = SendGridAPIClient('{s}')"),
    ),
    Kind(
        "mailgun_key",
        "messaging",
        _same(lambda rng: "key-" + rand(rng, HEX, 32)),
        ("curl --user 'api:{s}' https://api.mailgun.net/v3", "mailgun key {s}"),
    ),
    Kind(
        "twilio_api_key",
        "messaging",
        _same(lambda rng: "SK" + rand(rng, HEX, 32)),
        ("twilio api key {s}", "client = twilio.Client('{s}', secret)"),
    ),
    Kind(
        "slack_bot_token",
        "messaging",
        _same(
            lambda rng: (
                f"xoxb-{rng.randrange(10**10, 10**11)}-{rng.randrange(10**12, 10**13)}-{rand(rng, ALNUM, 24)}"
            )
        ),
        ("SLACK_BOT_TOKEN={s}", "slack_sdk.WebClient(token='{s}')"),
    ),
    Kind(
        "slack_user_token",
        "messaging",
        _same(
            lambda rng: (
                f"xoxp-{rng.randrange(10**10, 10**11)}-{rng.randrange(10**12, 10**13)}-{rand(rng, HEX, 32)}"
            )
        ),
        ("the user token {s} can read DMs", "xoxp: {s}"),
    ),
    Kind(
        "slack_webhook",
        "messaging",
        _same(
            lambda rng: (
                f"https://hooks.slack.com/services/T{rand(rng, UPPER_DIGITS, 8)}/B{rand(rng, UPPER_DIGITS, 8)}/{rand(rng, ALNUM, 24)}"
            )
        ),
        ('curl -X POST {s} -d \'{{"text":"deployed"}}\'', "ALERT_WEBHOOK={s}"),
    ),
    Kind(
        "discord_bot_token",
        "messaging",
        _same(_discord),
        ("client.run('{s}')", "bot token {s} was reset"),
    ),
    Kind(
        "discord_webhook",
        "messaging",
        _same(
            lambda rng: (
                f"https://discord.com/api/webhooks/{rng.randrange(10**17, 10**18)}/{rand(rng, RUN, 68)}"
            )
        ),
        ("curl -X POST {s} -d @msg.json", "HOOK={s}"),
    ),
    Kind(
        "telegram_bot_token",
        "messaging",
        _same(lambda rng: f"{rng.randrange(10**8, 10**10)}:AA{rand(rng, RUN, 33)}"),
        ("curl https://api.telegram.org/bot{s}/getUpdates", "Bot('{s}')"),
    ),
    Kind(
        "jwt", "token", _same(_jwt), ("Authorization: Bearer {s}", "the session cookie holds {s}")
    ),
    # -- private keys ---------------------------------------------------------------------------------
    Kind("rsa_private_key", "key", _pem("RSA PRIVATE KEY"), ("cat deploy.pem\n{s}", "{s}")),
    Kind(
        "openssh_private_key",
        "key",
        _pem("OPENSSH PRIVATE KEY"),
        ("cat ~/.ssh/id_ed25519\n{s}", "{s}"),
    ),
    Kind(
        "ec_private_key",
        "key",
        _pem("EC PRIVATE KEY"),
        ("openssl ecparam -genkey printed\n{s}", "{s}"),
    ),
    Kind("pkcs8_private_key", "key", _pem("PRIVATE KEY"), ("tls.key: |\n{s}", "{s}")),
    Kind("encrypted_private_key", "key", _pem("ENCRYPTED PRIVATE KEY"), ("key.pem:\n{s}", "{s}")),
    Kind(
        "pgp_private_key",
        "key",
        _pem("PGP PRIVATE KEY BLOCK"),
        ("gpg --export-secret-keys -a\n{s}", "{s}"),
    ),
    Kind(
        "gcp_service_account_key",
        "key",
        _gcp,
        (
            '{{"type": "service_account", "private_key": "{s}", "client_email": "x@p.iam.gserviceaccount.com"}}',
            '"private_key": "{s}",',
        ),
    ),
    # -- passwords in URLs ----------------------------------------------------------------------------
    Kind(
        "postgres_url",
        "url",
        _pw(),
        (
            "DATABASE_URL=postgres://app:{s}@db.internal:5432/orders",
            "psql postgresql://admin:{s}@10.0.0.5/app",
        ),
    ),
    Kind(
        "mysql_url",
        "url",
        _pw(),
        ("mysql://root:{s}@localhost:3306/shop", "jdbc:mysql://app:{s}@db/x"),
    ),
    Kind(
        "mongodb_url",
        "url",
        _pw(),
        (
            "mongodb+srv://svc:{s}@cluster0.abcde.mongodb.net/prod",
            "MONGO_URI=mongodb://admin:{s}@mongo:27017",
        ),
    ),
    Kind(
        "redis_url",
        "url",
        _pw(),
        ("REDIS_URL=redis://default:{s}@cache:6379/0", "rediss://:{s}@redis.acme.dev:6380"),
    ),
    Kind(
        "amqp_url",
        "url",
        _pw(),
        ("amqp://guest:{s}@rabbit:5672/", "CELERY_BROKER=amqps://worker:{s}@mq.acme.dev"),
    ),
    Kind(
        "git_https_credentials",
        "url",
        _pw(),
        (
            "git clone https://deploy:{s}@git.acme.dev/app.git",
            "url = https://bot:{s}@bitbucket.org/acme/app.git",
        ),
    ),
    Kind(
        "ftp_url",
        "url",
        _pw(),
        ("ftp://upload:{s}@files.acme.dev/in/", "lftp ftp://backup:{s}@nas"),
    ),
    Kind(
        "smtp_url",
        "url",
        _pw(),
        ("EMAIL_URL=smtp://mailer:{s}@smtp.acme.dev:587", "smtps://alerts:{s}@mail"),
    ),
    # -- headers and cookies --------------------------------------------------------------------------
    Kind(
        "bearer_header",
        "header",
        _token("", RUN, 40),
        ("curl -H 'Authorization: Bearer {s}' https://api.acme.dev", "Authorization: Bearer {s}"),
    ),
    Kind(
        "basic_auth_header",
        "header",
        _basic,
        ("Authorization: Basic {s}", "headers = {{'Authorization': 'Basic {s}'}}"),
    ),
    Kind(
        "api_key_header",
        "header",
        _token("", ALNUM, 32),
        ("curl -H 'X-Api-Key: {s}' https://api.acme.dev/v1", "x-api-key: {s}"),
    ),
    Kind(
        "cookie_header",
        "header",
        _same(lambda rng: f"sessionid={rand(rng, HEX, 32)}; theme=dark"),
        ("Cookie: {s}", "headers['Cookie'] = '{s}'"),
    ),
    Kind(
        "set_cookie_header",
        "header",
        _same(lambda rng: f"session={rand(rng, ALNUM, 40)}; Path=/; HttpOnly"),
        ("Set-Cookie: {s}", "< set-cookie: {s}"),
    ),
    # -- command lines --------------------------------------------------------------------------------
    Kind(
        "mysql_cli_password",
        "command",
        _pw(),
        ("mysql -h db -u root -p{s} shop", "mysqldump -uroot -p'{s}' --all-databases"),
    ),
    Kind(
        "curl_user_password",
        "command",
        _pw(),
        ("curl -u admin:{s} https://registry/v2/", "curl --user 'deploy:{s}' -X POST https://ci"),
    ),
    Kind(
        "sshpass_password",
        "command",
        _pw(),
        ("sshpass -p '{s}' ssh root@10.0.0.12", "sshpass -p {s} scp a b:/srv"),
    ),
    Kind(
        "curl_cookie",
        "command",
        _same(lambda rng: f"sessionid={rand(rng, HEX, 32)}"),
        ("curl -b '{s}' https://admin.acme.dev/api", 'curl --cookie "{s}" https://x'),
    ),
    Kind(
        "docker_login_password",
        "command",
        _pw(),
        (
            "docker login -u bot --password {s} ghcr.io",
            "docker login --username=ci --password={s} registry",
        ),
    ),
    Kind(
        "psql_env_password",
        "command",
        _pw(),
        ("PGPASSWORD={s} psql -h db -U app", "PGPASSWORD='{s}' pg_dump app > a.sql"),
    ),
    Kind(
        "mongosh_password",
        "command",
        _pw(),
        ("mongosh mongodb://db --username app --password {s}", "mongo --password '{s}' admin"),
    ),
    Kind(
        "wget_password",
        "command",
        _pw(),
        ("wget --user=ci --password={s} https://files/x.tgz", "wget --http-password={s} https://x"),
    ),
    Kind(
        "git_credential_store",
        "command",
        _pw(),
        ("https://ci:{s}@github.com", "echo 'https://bot:{s}@gitlab.com' >> ~/.git-credentials"),
    ),
    # -- assignments in code and config ----------------------------------------------------------------
    Kind(
        "dotenv_password", "assignment", _pw(), ("DB_PASSWORD={s}", "export POSTGRES_PASSWORD={s}")
    ),
    Kind(
        "json_password",
        "assignment",
        _pw(),
        ('{{"user": "app", "password": "{s}"}}', '"db_password": "{s}",'),
    ),
    Kind(
        "yaml_password",
        "assignment",
        _pw(),
        ("database:\n  password: {s}", "  admin_password: '{s}'"),
    ),
    Kind(
        "oauth_client_secret",
        "assignment",
        _token("", RUN, 40),
        ("client_secret={s}", "GOOGLE_CLIENT_SECRET: {s}"),
    ),
    Kind(
        "django_secret_key",
        "assignment",
        _token("django-insecure-", ALNUM + "!@#%^&*(-_=+)", 40),
        ("SECRET_KEY = '{s}'", "DJANGO_SECRET_KEY={s}"),
    ),
    Kind(
        "jwt_secret",
        "assignment",
        _token("", ALNUM, 48),
        ("JWT_SECRET={s}", "jwt.encode(p, key, ...)  # JWT_SECRET: {s}"),
    ),
    Kind(
        "api_token_env",
        "assignment",
        _token("", ALNUM, 32),
        ("API_TOKEN={s}", 'export SERVICE_TOKEN="{s}"'),
    ),
    Kind(
        "access_token_query",
        "assignment",
        _token("", ALNUM, 40),
        ("GET /v1/me?access_token={s}&fields=id", "https://graph.acme.dev/me?access_token={s}"),
    ),
    Kind(
        "password_flag",
        "assignment",
        _pw(),
        ("app-cli login --user ops --password {s}", "./deploy.sh --db-password={s}"),
    ),
    Kind("smtp_password", "assignment", _pw(), ("SMTP_PASS={s}", "EMAIL_HOST_PASSWORD = '{s}'")),
    Kind("passphrase", "assignment", _pw(), ("passphrase: {s}", "GPG_PASSPHRASE={s}")),
    Kind(
        "npmrc_auth_token",
        "assignment",
        _token("", ALNUM, 36),
        ("//npm.pkg.github.com/:_authToken={s}", "//registry.acme.dev/:_authToken={s}"),
    ),
    Kind(
        "pypirc_password",
        "assignment",
        _pw(),
        ("[acme]\nrepository = https://pypi.acme.dev\npassword = {s}", "password = {s}"),
    ),
    Kind(
        "terraform_password",
        "assignment",
        _pw(),
        ('  password = "{s}"', 'variable "db" {{ default = {{ password = "{s}" }} }}'),
    ),
    Kind(
        "k8s_string_data",
        "assignment",
        _pw(),
        ("stringData:\n  password: {s}", '  DB_PASSWORD: "{s}"'),
    ),
    Kind(
        "encryption_key",
        "assignment",
        _same(lambda rng: b64(rng.randbytes(32))),
        ("ENCRYPTION_KEY={s}", "MASTER_KEY: {s}"),
    ),
    Kind(
        "webhook_secret",
        "assignment",
        _token("", ALNUM, 40),
        ("WEBHOOK_SECRET={s}", "github_webhook_secret: {s}"),
    ),
    Kind(
        "session_secret",
        "assignment",
        _token("", ALNUM, 32),
        ("app.use(session({{ secret: '{s}' }}))", "SESSION_SECRET={s}"),
    ),
    Kind(
        "generic_service_key",
        "assignment",
        _token("", ALNUM, 40),
        ("ACME_SERVICE_KEY={s}", "BILLING_API_KEY={s}"),
    ),
    Kind(
        "spring_datasource_password",
        "assignment",
        _pw(),
        ("spring.datasource.password={s}", "quarkus.datasource.password={s}"),
    ),
    Kind(
        "netrc_password",
        "assignment",
        _pw(),
        (
            "machine api.acme.dev login bot password {s}",
            "machine github.com\n  login ci\n  password {s}",
        ),
    ),
    Kind(
        "php_define_password",
        "assignment",
        _pw(),
        ("define('DB_PASSWORD', '{s}');", "$config['password'] = '{s}';"),
    ),
    Kind("ini_password", "assignment", _pw(), ("[client]\nuser=root\npassword={s}", "pass={s}")),
    # -- encoded ----------------------------------------------------------------------------------------
    Kind(
        "docker_config_auth",
        "encoded",
        _docker_auth,
        (
            '{{"auths": {{"https://index.docker.io/v1/": {{"auth": "{s}"}}}}}}',
            '      "auth": "{s}"',
        ),
    ),
    Kind(
        "base64_aws_key",
        "encoded",
        _b64_of("AKIA", UPPER_DIGITS, 16),
        ("data:\n  AWS_ACCESS_KEY_ID: {s}", "kubectl get secret aws -o yaml shows {s}"),
    ),
    Kind(
        "base64_github_token",
        "encoded",
        _b64_of("ghp_", ALNUM, 36),
        ("data:\n  token: {s}", "GH_TOKEN_B64={s}"),
    ),
    Kind("base64_private_key", "encoded", _b64_pem, ("data:\n  tls.key: {s}", "tls.key: {s}")),
    Kind(
        "dockerconfigjson",
        "encoded",
        _dockerconfigjson,
        ("data:\n  .dockerconfigjson: {s}", "kubectl create secret ... printed {s}"),
    ),
)


def _sha(rng: random.Random) -> str:
    return hashlib.sha1(rng.randbytes(16)).hexdigest()


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(bytes=rng.randbytes(16), version=4))


_SERVICES = [
    "STRIPE",
    "GITHUB",
    "OPENAI",
    "SLACK",
    "SENTRY",
    "POSTGRES",
    "REDIS",
    "MAILGUN",
    "TWILIO",
    "ACME",
    "DB",
    "SMTP",
]


def _svc(rng: random.Random) -> str:
    return rng.choice(_SERVICES)


CLEAN: tuple[Callable[[random.Random], str], ...] = (
    # placeholders and references beside secret-named keys
    lambda rng: "API_KEY=${API_KEY:?set it}",
    lambda rng: (n := _svc(rng)) and f"{n}_API_KEY=${{{n}_API_KEY:?set {n}_API_KEY first}}",
    lambda rng: (n := _svc(rng)) and f"{n}_TOKEN=${{{n}_TOKEN:-}}",
    lambda rng: (n := _svc(rng)) and f'export {n}_SECRET="${{{n}_SECRET:?missing}}"',
    lambda rng: (n := _svc(rng)) and f"{n}_PASSWORD=${{{n}_PASSWORD:-changeme}}",
    lambda rng: (n := _svc(rng)) and f"  password: ${{{n}_PASSWORD}}",
    lambda rng: (n := _svc(rng)) and f"token = os.environ['{n}_TOKEN']",
    lambda rng: (n := _svc(rng)) and f'{n.lower()}_key = os.getenv("{n}_KEY", "")',
    lambda rng: (n := _svc(rng)) and f"  {n}_TOKEN: ${{{{ secrets.{n}_TOKEN }}}}",
    lambda rng: (n := _svc(rng)) and f"password: <your-{n.lower()}-password>",
    lambda rng: (n := _svc(rng)) and f"{n}_API_KEY=your_{n.lower()}_api_key_here",
    lambda rng: (n := _svc(rng)) and f"# {n}_SECRET=  (set it in .env.local, never commit it)",
    lambda rng: "api_key: str = Field(default=None, description='the key')",
    lambda rng: "password = settings.DB_PASSWORD",
    lambda rng: "secret = self.config.secret",
    lambda rng: "headers = {'Authorization': f'Bearer {token}'}",
    lambda rng: 'client = OpenAI(api_key=os.getenv("OPENAI_API_KEY"))',
    lambda rng: "GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}",
    lambda rng: "password: <your-password>",
    lambda rng: "OPENAI_API_KEY=sk-...",
    lambda rng: "ANTHROPIC_API_KEY=sk-ant-xxxxxxxxxxxxxxxxxxxxxxxx",
    lambda rng: "export STRIPE_KEY=sk_test_XXXXXXXXXXXXXXXXXXXXXXXX",
    lambda rng: "token: ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    lambda rng: "SECRET_KEY=your_secret_key_here",
    lambda rng: "password=changeme",
    lambda rng: "password: null",
    lambda rng: "DB_PASSWORD=",
    lambda rng: "$env:API_KEY = Read-Host -AsSecureString",
    lambda rng: "set API_TOKEN=%API_TOKEN%",
    lambda rng: "password = '{{ vault_db_password }}'",
    lambda rng: "secret_key = keyring.get_password('acme', 'deploy')",
    lambda rng: "max_tokens = 4096",
    lambda rng: "token_count = len(tokens)",
    lambda rng: "pad_token = tokenizer.eos_token",
    lambda rng: "public_key = load_pem_public_key(data)",
    lambda rng: "cache_key = f'{user_id}:{page}'",
    lambda rng: "primary_key = 'id'",
    lambda rng: "d['key'] = value",
    lambda rng: "for key, value in items.items():",
    lambda rng: "if password_reset_requested: send_email()",
    lambda rng: "The password reset flow sends a link that expires in an hour.",
    lambda rng: "We rotate the token weekly and keep the secret in Vault.",
    lambda rng: "tests pass now; the key is to mock the clock.",
    # command lines that look like credentials and are not
    lambda rng: "mysql -u root -p shop",
    lambda rng: "mysql -h db -P 3306 -u app -p",
    lambda rng: "mkdir -p build/dist && cp -p a b",
    lambda rng: "ssh -p 2222 deploy@10.0.0.12",
    lambda rng: "docker run -p 8080:80 -e PASSWORD=$PASSWORD nginx",
    lambda rng: 'curl -u "$USER:$PASS" https://api.acme.dev',
    lambda rng: "curl -u admin https://api.acme.dev  # prompts for the password",
    lambda rng: "curl -b cookies.txt -c cookies.txt https://example.com",
    lambda rng: "sshpass -f ~/.ssh/pass ssh host",
    lambda rng: "sshpass -e ssh host",
    lambda rng: "pip install -U pip && python -m pytest -p no:cacheprovider",
    lambda rng: "git push -u origin feature/login-page",
    lambda rng: "docker login -u bot --password-stdin ghcr.io < token.txt",
    lambda rng: "redis-cli -h cache ping",
    lambda rng: "PGPASSWORD=$DB_PASSWORD psql -h db -U app",
    lambda rng: "openssl req -new -key server.key -out server.csr",
    # headers and cookies that are not credentials
    lambda rng: "Cookie: theme=dark; lang=en",
    lambda rng: "Set-Cookie: consent=yes; Path=/; Max-Age=31536000",
    lambda rng: "the cookie banner now remembers the choice",
    lambda rng: "Authorization: Bearer <token>",
    lambda rng: "Authorization: Bearer $TOKEN",
    lambda rng: "Accept: application/json",
    lambda rng: '"auth": "required"',
    lambda rng: '{"auth": {"type": "oauth2", "flow": "pkce"}}',
    lambda rng: '"auths": {}',
    # URLs without credentials
    lambda rng: "postgres://localhost:5432/app",
    lambda rng: "DATABASE_URL=postgres://app@db:5432/orders",
    lambda rng: "redis://cache:6379/0",
    lambda rng: "https://user@github.com/acme/app.git",
    lambda rng: "mongodb://${MONGO_USER}:${MONGO_PASSWORD}@mongo:27017",
    lambda rng: "postgres://app:<password>@db/app",
    lambda rng: "https://example.com/docs?page=2&sort=asc",
    # ids, hashes, encodings
    lambda rng: f"commit {_sha(rng)}",
    lambda rng: f"request_id={_uuid(rng)}",
    lambda rng: f"sha256:{hashlib.sha256(rng.randbytes(8)).hexdigest()}",
    lambda rng: f'"integrity": "sha512-{b64(rng.randbytes(64))}"',
    lambda rng: f'etag: W/"{b64(rng.randbytes(18))}"',
    lambda rng: f"tool_use_id: toolu_01{rand(rng, ALNUM, 22)}",
    lambda rng: f"01{rand(rng, '0123456789ABCDEFGHJKMNPQRSTVWXYZ', 24)}",
    lambda rng: f"data: {b64(b'hello world, this is a test payload')}",
    lambda rng: f"  AWS_REGION: {b64(b'us-east-1')}",
    lambda rng: f'<img src="data:image/png;base64,{b64(rng.randbytes(48))}">',
    lambda rng: f"x-amz-request-id: {rand(rng, UPPER_DIGITS, 16)}",
    lambda rng: f"node_id = 'toc:segment:2024-01-18T10:00:{_sha(rng)[:6]}'",
    lambda rng: f"session_id={_uuid(rng)} events={rng.randrange(1, 5000)}",
    lambda rng: f"version 1.{rng.randrange(30)}.{rng.randrange(9)} released",
    lambda rng: f"MTAwMDAwMDAw.{rand(rng, ALNUM, 4)}.done",
    lambda rng: f"see https://github.com/acme/app/blob/{_sha(rng)}/src/auth.py#L42",
    lambda rng: "AKIAIOSFODNN7EXAMPLE is the documentation's example key",
    lambda rng: "sk-proj-**** (redacted in the dashboard)",
    lambda rng: "xoxb-your-bot-token",
    lambda rng: "-----BEGIN PUBLIC KEY-----",
    lambda rng: "-----BEGIN CERTIFICATE-----",
    # prose and code about credentials
    lambda rng: "Store the API key in the keychain, never in the repo.",
    lambda rng: "rotate_secret(name='db', days=30)",
    lambda rng: "class TokenBucket: capacity: int; refill_rate: float",
    lambda rng: "def check_password(raw: str, hashed: str) -> bool:",
    lambda rng: "SELECT id, password_hash FROM users WHERE email = ?",
    lambda rng: "const secretsManager = new SecretsManagerClient({ region });",
    lambda rng: "PASSWORD_MIN_LENGTH = 12",
    lambda rng: "ALTER TABLE users ADD COLUMN api_key_last4 TEXT;",
    lambda rng: "arn:aws:secretsmanager:us-east-1:123456789012:secret:prod/db-AbCdEf",
    lambda rng: "vault kv get -field=password secret/prod/db",
)
"""Clean look-alikes: each is a template drawn several times (the random ones differ)."""


def planted(seed: int = 20241124) -> list[Sample]:
    """Every kind's samples, in order."""
    rng = random.Random(seed)
    return [s for kind in KINDS for s in kind.samples(rng)]


def clean(seed: int = 20241124, draws: int = 4) -> list[str]:
    """The clean look-alikes (``draws`` of each template; repeats of a fixed one dropped)."""
    rng = random.Random(seed + 1)
    out: dict[str, None] = {}
    for make in CLEAN:
        for _ in range(draws):
            out[make(rng)] = None
    return list(out)


CLEAN_PATHS: tuple[Callable[[random.Random], str], ...] = (
    lambda rng: f"home/dev/.claude/projects/-home-dev-acme/{_uuid(rng)}",
    lambda rng: f"home/dev/.codex/sessions/2024/05/18/rollout-2024-05-18T10-00-00-{_uuid(rng)}",
    lambda rng: f"tmp/pytest-of-dev/pytest-{rng.randrange(999)}/test_auth0/session",
    lambda rng: f"work/acme/node_modules/.cache/{_sha(rng)}",
    lambda rng: f"work/acme/.git/objects/{_sha(rng)[:2]}/{_sha(rng)[2:]}",
    lambda rng: f"var/cache/pip/http/{hashlib.sha256(rng.randbytes(8)).hexdigest()}",
    lambda rng: f"builds/{rand(rng, UPPER_DIGITS, 26)}/log",
    lambda rng: f"logs/toolu_01{rand(rng, ALNUM, 22)}",
    lambda rng: f"exports/{b64(rng.randbytes(12)).replace('/', '_')}",
    lambda rng: "work/acme/.env.example",
    lambda rng: "work/acme/config/secrets.yaml.template",
    lambda rng: "home/dev/.aws/credentials.bak",
    lambda rng: "home/dev/.ssh/id_ed25519.pub",
    lambda rng: "work/acme/src/auth/password_reset/handler",
    lambda rng: "work/acme/docs/api_key_rotation",
    lambda rng: "work/acme/tests/test_token_refresh",
    lambda rng: "work/acme/src/secrets_manager/client",
    lambda rng: "work/acme/migrations/0042_add_api_key_hash",
    lambda rng: "home/dev/Downloads/Screenshot 2024-05-18 at 10.00.00",
    lambda rng: "mnt/c/Users/dev/AppData/Roaming/Code/User/History",
    lambda rng: f"work/acme/dist/acme-1.{rng.randrange(30)}.{rng.randrange(9)}-py3-none-any",
    lambda rng: f"srv/backups/db-2024-05-{rng.randrange(10, 28)}T02-00-00Z",
    lambda rng: f"work/acme/coverage/lcov-report/{_sha(rng)[:8]}",
    lambda rng: "work/acme/src/cookie_consent/banner",
    lambda rng: "work/acme/k8s/overlays/prod/sealed-secret",
)
"""Clean look-alikes for the path placement: file and folder names around credentials."""


def clean_paths(seed: int = 20241124, draws: int = 3) -> list[str]:
    """The clean path look-alikes (``draws`` of each template; repeats dropped)."""
    rng = random.Random(seed + 2)
    out: dict[str, None] = {}
    for make in CLEAN_PATHS:
        for _ in range(draws):
            out[make(rng)] = None
    return list(out)
