"""Secrets and look-alikes a coding agent's snapshot really contains, for memstream.rules.secrets.

- ``SECRETS``: a secret embedded in a shell command, .env file, YAML, JSON, code, curl call or log
  line; after redaction ``secret`` must be gone, ``kind`` must be the marker's kind, and every word
  of ``context`` must still be there (the variable name, the host, the surrounding prose).
- ``LOOKALIKES``: random-looking or secret-sounding text that is not a secret and must survive
  unchanged.

Every fake value is generated here from a fixed seed in the provider's real format, so the file
holds no real key, and no literal that a secret scanner would flag.

Placeholders are decided by syntax: ``<your-key>``, ``${TOKEN}``, ``YOUR_TOKEN_HERE``, ``sk-...``,
``xxxx`` and masked ``****1234`` survive. A weak but real value such as ``changeme`` or
``guest`` is redacted (see ``SECRETS``): someone set it, and a memory never needs it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
from typing import NamedTuple

_RNG = random.Random(20240304)
_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_UPPER_DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
_HEX = "0123456789abcdef"
_B64 = _ALNUM + "+/"
_B64URL = _ALNUM + "-_"


def fake(alphabet: str, n: int) -> str:
    """``n`` characters of ``alphabet``, always with an upper-case letter, lower-case letter and digit
    when the alphabet has them (as real random keys do)."""
    classes = (str.isupper, str.islower, str.isdigit)
    want = [any(map(cls, alphabet)) for cls in classes]
    while True:
        s = "".join(_RNG.choice(alphabet) for _ in range(n))
        if [any(map(cls, s)) for cls in classes] == want:
            return s


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _jwt() -> str:
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = _b64url(json.dumps({"sub": "user-4821", "iat": 1714000000, "role": "admin"}).encode())
    return f"{header}.{payload}.{fake(_B64URL, 43)}"


def _pem(label: str, lines: int = 4) -> str:
    body = "\n".join(fake(_B64, 64) for _ in range(lines))
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----"


class SecretCase(NamedTuple):
    text: str
    secret: str
    kind: str
    context: tuple[str, ...]


ANTHROPIC = "sk-ant-api03-" + fake(_B64URL, 93) + "AA"
OPENAI = "sk-proj-" + fake(_B64URL, 48) + "T3BlbkFJ" + fake(_B64URL, 20)
OPENAI_LEGACY = "sk-" + fake(_ALNUM, 48)
XAI = "xai-" + fake(_ALNUM, 80)
GOOGLE = "AIza" + fake(_B64URL, 35)
VOYAGE = "pa-" + fake(_B64URL, 43)
HUGGINGFACE = "hf_" + fake(_ALNUM[:52], 34)
STRIPE = "sk_live_" + fake(_ALNUM, 24)
STRIPE_RESTRICTED = "rk_live_" + fake(_ALNUM, 24)
SLACK = "xoxb-" + "".join(_RNG.choice("0123456789") for _ in range(12)) + "-" + fake(_ALNUM, 24)
GITHUB = "ghp_" + fake(_ALNUM, 36)
GITHUB_FINE = "github_pat_" + fake(_ALNUM, 22) + "_" + fake(_ALNUM, 59)
GITLAB = "glpat-" + fake(_B64URL, 20)
NPM = "npm_" + fake(_ALNUM, 36)
SENDGRID = "SG." + fake(_B64URL, 22) + "." + fake(_B64URL, 43)
TWILIO_KEY = "SK" + fake(_HEX, 32)
AWS_ID = "AKIA" + fake(_UPPER_DIGITS, 16)
AWS_SECRET = fake(_B64, 40)
AZURE_KEY = fake(_B64, 86) + "=="
JWT = _jwt()
BEARER = fake(_B64URL, 40)
BASIC = base64.b64encode(b"deploy:" + fake(_ALNUM, 16).encode()).decode()
RSA_KEY = _pem("RSA PRIVATE KEY")
OPENSSH_KEY = _pem("OPENSSH PRIVATE KEY")
EC_KEY = _pem("EC PRIVATE KEY", 2)
PGP_KEY = _pem("PGP PRIVATE KEY BLOCK", 3)
GCP_KEY = _pem("PRIVATE KEY", 3)
PG_PASSWORD = fake(_ALNUM, 18)
MONGO_PASSWORD = fake(_ALNUM, 20)
REDIS_PASSWORD = fake(_ALNUM, 24)
ODBC_PASSWORD = fake(_ALNUM, 14) + "!"
DJANGO_SECRET = "django-insecure-" + fake(_ALNUM, 40)
GENERIC_TOKEN = fake(_ALNUM, 32)

_GCP_JSON = json.dumps(
    {
        "type": "service_account",
        "project_id": "shop-prod-381204",
        "private_key_id": hashlib.sha1(b"key-id").hexdigest(),
        "private_key": GCP_KEY + "\n",
        "client_email": "deployer@shop-prod-381204.iam.gserviceaccount.com",
    },
    indent=2,
)

#: How the key appears inside the JSON file: one line, newlines escaped.
GCP_KEY_ESCAPED = json.dumps(GCP_KEY)[1:-1]

SECRETS: list[SecretCase] = [
    SecretCase(f"export ANTHROPIC_API_KEY={ANTHROPIC}", ANTHROPIC, "anthropic-key", ("export", "ANTHROPIC_API_KEY")),
    SecretCase(
        f'client = anthropic.Anthropic(api_key="{ANTHROPIC}")  # TODO move to env',
        ANTHROPIC,
        "anthropic-key",
        ("client", "anthropic.Anthropic(api_key=", "TODO move to env"),
    ),
    SecretCase(
        f"OPENAI_API_KEY={OPENAI}\nOPENAI_ORG=org-shop",
        OPENAI,
        "openai-key",
        ("OPENAI_API_KEY=", "OPENAI_ORG=org-shop"),
    ),
    SecretCase(
        f"openai.AuthenticationError: Incorrect API key provided: {OPENAI_LEGACY}. You can find your key at",
        OPENAI_LEGACY,
        "openai-key",
        ("Incorrect API key provided:", "You can find your key at"),
    ),
    SecretCase(f"XAI_API_KEY: {XAI}", XAI, "xai-key", ("XAI_API_KEY:",)),
    SecretCase(
        f"https://maps.googleapis.com/maps/api/geocode/json?address=Berlin&key={GOOGLE}",
        GOOGLE,
        "google-api-key",
        ("maps.googleapis.com", "address=Berlin", "key="),
    ),
    SecretCase(f"vo = voyageai.Client(api_key='{VOYAGE}')", VOYAGE, "voyage-key", ("voyageai.Client(api_key=",)),
    SecretCase(
        f"$ huggingface-cli login --token {HUGGINGFACE}",
        HUGGINGFACE,
        "huggingface-token",
        ("huggingface-cli login", "--token"),
    ),
    SecretCase(f'stripe.api_key = "{STRIPE}"', STRIPE, "stripe-key", ("stripe.api_key",)),
    SecretCase(
        f"STRIPE_RESTRICTED_KEY={STRIPE_RESTRICTED}",
        STRIPE_RESTRICTED,
        "stripe-key",
        ("STRIPE_RESTRICTED_KEY=",),
    ),
    SecretCase(
        f'curl -X POST -H "Authorization: Bearer {SLACK}" https://slack.com/api/chat.postMessage',
        SLACK,
        "slack-token",
        ("curl -X POST", "Authorization: Bearer", "https://slack.com/api/chat.postMessage"),
    ),
    SecretCase(
        f"slack:\n  bot_token: {SLACK}\n  channel: '#deploys'",
        SLACK,
        "slack-token",
        ("bot_token:", "channel: '#deploys'"),
    ),
    SecretCase(
        f"git remote set-url origin https://x-access-token:{GITHUB}@github.com/shop/api.git",
        GITHUB,
        "github-token",
        ("git remote set-url origin", "https://x-access-token:", "@github.com/shop/api.git"),
    ),
    SecretCase(
        f"GH_TOKEN={GITHUB_FINE} gh pr create --fill",
        GITHUB_FINE,
        "github-token",
        ("GH_TOKEN=", "gh pr create --fill"),
    ),
    SecretCase(
        f"[remote rejected] main -> main (push declined due to repository rule violations: {GITHUB})",
        GITHUB,
        "github-token",
        ("remote rejected", "push declined due to repository rule violations"),
    ),
    SecretCase(f'variables:\n  GITLAB_TOKEN: "{GITLAB}"', GITLAB, "gitlab-token", ("variables:", "GITLAB_TOKEN:")),
    SecretCase(f"//registry.npmjs.org/:_authToken={NPM}", NPM, "npm-token", ("//registry.npmjs.org/:_authToken=",)),
    SecretCase(f"sg = SendGridAPIClient('{SENDGRID}')", SENDGRID, "sendgrid-key", ("sg = SendGridAPIClient(",)),
    SecretCase(f"TWILIO_API_KEY_SID={TWILIO_KEY}", TWILIO_KEY, "twilio-api-key", ("TWILIO_API_KEY_SID=",)),
    SecretCase(
        f"[default]\naws_access_key_id = {AWS_ID}\naws_secret_access_key = {AWS_SECRET}\nregion = eu-west-1",
        AWS_SECRET,
        "aws-secret-key",
        ("[default]", "aws_access_key_id =", "aws_secret_access_key =", "region = eu-west-1"),
    ),
    SecretCase(
        f"botocore.exceptions.ClientError: The AWS Access Key Id {AWS_ID} does not exist in our records.",
        AWS_ID,
        "aws-access-key",
        ("botocore.exceptions.ClientError", "does not exist in our records."),
    ),
    SecretCase(
        f"cat ~/.config/gcloud/sa.json\n{_GCP_JSON}",
        GCP_KEY_ESCAPED,
        "private-key",
        ('"private_key":', "service_account", "client_email"),
    ),
    SecretCase(
        "AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=https;AccountName=shopassets;"
        f"AccountKey={AZURE_KEY};EndpointSuffix=core.windows.net",
        AZURE_KEY,
        "azure-storage-key",
        ("AccountName=shopassets", "AccountKey=", "EndpointSuffix=core.windows.net"),
    ),
    SecretCase(
        f"INFO  http: GET /api/orders headers={{'Authorization': 'Bearer {BEARER}', 'Accept': 'application/json'}}",
        BEARER,
        "bearer-token",
        ("GET /api/orders", "'Authorization': 'Bearer", "'Accept': 'application/json'"),
    ),
    SecretCase(
        f"curl https://api.shop.dev/admin -H 'Authorization: Basic {BASIC}'",
        BASIC,
        "basic-auth",
        ("curl https://api.shop.dev/admin", "Authorization: Basic"),
    ),
    SecretCase(
        f"The session cookie holds {JWT} which expires in 15 minutes",
        JWT,
        "jwt",
        ("session cookie holds", "expires in 15 minutes"),
    ),
    SecretCase(
        f"$ cat ~/.ssh/id_rsa\n{RSA_KEY}\n$ chmod 600 ~/.ssh/id_rsa",
        RSA_KEY,
        "private-key",
        ("cat ~/.ssh/id_rsa", "chmod 600 ~/.ssh/id_rsa"),
    ),
    SecretCase(f"deploy key:\n{OPENSSH_KEY}\n", OPENSSH_KEY, "private-key", ("deploy key:",)),
    SecretCase(f'TLS_KEY="{EC_KEY}"', EC_KEY, "private-key", ("TLS_KEY=",)),
    SecretCase(
        f"gpg --export-secret-keys shop > key.asc\n{PGP_KEY}",
        PGP_KEY,
        "private-key",
        ("gpg --export-secret-keys shop",),
    ),
    SecretCase(
        f"DATABASE_URL=postgres://app:{PG_PASSWORD}@db:5432/shop",
        PG_PASSWORD,
        "password",
        ("DATABASE_URL=postgres://app:", "@db:5432/shop"),
    ),
    SecretCase(
        f'MONGO_URI = "mongodb+srv://shop-admin:{MONGO_PASSWORD}@cluster0.ab1cd.mongodb.net/orders?retryWrites=true"',
        MONGO_PASSWORD,
        "password",
        ("MONGO_URI", "mongodb+srv://shop-admin:", "@cluster0.ab1cd.mongodb.net/orders"),
    ),
    SecretCase(
        f"celery worker --broker redis://:{REDIS_PASSWORD}@cache:6379/0",
        REDIS_PASSWORD,
        "password",
        ("celery worker --broker redis://:", "@cache:6379/0"),
    ),
    SecretCase(
        '"ConnectionStrings": { "Default": "Server=sql01;Database=Shop;User Id=sa;'
        f'Password={ODBC_PASSWORD};TrustServerCertificate=True" }}',
        ODBC_PASSWORD,
        "connection-string",
        ("Server=sql01", "User Id=sa", "Password=", "TrustServerCertificate=True"),
    ),
    SecretCase(f"SECRET_KEY={DJANGO_SECRET}\nDEBUG=False", DJANGO_SECRET, "secret", ("SECRET_KEY=", "DEBUG=False")),
    SecretCase(
        "services:\n  db:\n    image: postgres:16\n    environment:\n      POSTGRES_PASSWORD: changeme\n",
        "changeme",
        "password",
        ("image: postgres:16", "POSTGRES_PASSWORD:"),
    ),
    SecretCase(
        f'{{"username": "deploy", "api_key": "{GENERIC_TOKEN}", "region": "eu"}}',
        GENERIC_TOKEN,
        "api-key",
        ('"username": "deploy"', '"api_key":', '"region": "eu"'),
    ),
    SecretCase(
        "mysql -h db -u root -pHunter2024 shop < dump.sql",
        "Hunter2024",
        "password",
        ("mysql -h db -u root -p", "shop < dump.sql"),
    ),
    SecretCase(
        "docker login registry.shop.dev --username ci --password Tr0ub4dor3",
        "Tr0ub4dor3",
        "password",
        ("docker login registry.shop.dev", "--username ci", "--password"),
    ),
    SecretCase(
        "ERROR login failed for user=alice password=Winter2024! from 10.0.0.7",
        "Winter2024!",
        "password",
        ("login failed for user=alice", "password=", "from 10.0.0.7"),
    ),
    SecretCase(
        "env:\n  - name: REDIS_PASSWORD\n    value: s3cr3t-redis-pw\n  - name: LOG_LEVEL\n    value: info",
        "s3cr3t-redis-pw",
        "password",
        ("name: REDIS_PASSWORD", "value:", "LOG_LEVEL", "value: info"),
    ),
    SecretCase(
        "<server>\n  <id>nexus</id>\n  <password>n3xus-Deploy</password>\n</server>",
        "n3xus-Deploy",
        "password",
        ("<id>nexus</id>", "<password>"),
    ),
    SecretCase(
        "curl -u admin:Adm1nPass https://jenkins.shop.dev/api/json",
        "Adm1nPass",
        "password",
        ("curl -u admin:", "https://jenkins.shop.dev/api/json"),
    ),
    SecretCase(
        f"const config = {{ clientSecret: '{GENERIC_TOKEN}', clientId: 'web' }};",
        GENERIC_TOKEN,
        "secret",
        ("clientSecret:", "clientId: 'web'"),
    ),
    SecretCase(
        "amqp_url: amqp://shop:guest@rabbitmq:5672/",
        "guest",
        "password",
        ("amqp_url: amqp://shop:", "@rabbitmq:5672/"),
    ),
]

_SHA1 = hashlib.sha1(b"memstream").hexdigest()
_SHA256 = hashlib.sha256(b"memstream").hexdigest()
_SHA512_B64 = base64.b64encode(hashlib.sha512(b"left-pad").digest()).decode()
_PNG = base64.b64encode(hashlib.sha512(b"png").digest() * 3).decode()

LOOKALIKES: list[str] = [
    f"Fixed in {_SHA1[:7]}; see commit {_SHA1} for the full diff.",
    f"sha256sum dist/memstream.tar.gz\n{_SHA256}  dist/memstream.tar.gz",
    f"docker pull ghcr.io/shop/api@sha256:{_SHA256}",
    "request_id=3f2b8c1e-9a4d-4e7b-8f21-6c0d5e9a7b13 trace_id=4bf92f3577b34da6a3ce929d0e0e4736",
    f'<img src="data:image/png;base64,{_PNG}" alt="logo">',
    f'"integrity": "sha512-{_SHA512_B64}"',
    "Bumped fastapi from 0.110.0 to 0.111.0-rc.1 (semver minor) and pydantic to 2.7.1",
    "See https://docs.python.org/3/library/re.html#re.Pattern.search for details",
    "postgres://db.internal:5432/shop and https://user@github.com/shop/api.git have no password",
    "Users can reset the password via the admin page; the token expires after 24 hours.",
    "password = get_password()",
    'api_key = os.environ["API_KEY"]',
    'token = os.getenv("GITHUB_TOKEN")',
    "API_KEY=<your-key>",
    "export OPENAI_API_KEY=sk-...",
    "ANTHROPIC_API_KEY=YOUR_TOKEN_HERE",
    "DB_PASSWORD=${DB_PASSWORD}",
    "password: {{ .Values.db.password }}",
    "token: ${{ secrets.GITHUB_TOKEN }}",
    "Stripe key in the dashboard shows as sk_live_****************4242",
    "color: #1e293b; background: #f8fafc; border-color: rgba(15, 23, 42, 0.08);",
    "kubectl rollout restart deployment/api-server-7d9f8b6c5-x2x4z -n shop-prod",
    "pa-worker-7d9f8b6c5-x2x4z is CrashLoopBackOff in namespace shop-staging",
    "The word antidisestablishmentarianism and pneumonoultramicroscopicsilicovolcanoconiosis are long",
    "Edited /home/dev/shop/src/services/token_refresh_service.py and ./config/secrets.example.yaml",
    "Listening on 0.0.0.0:8080 and 127.0.0.1:5432, metrics on :9090",
    "2024-03-04T12:34:56.789Z started; finished at 2024-03-04T12:35:01+00:00",
    'ETag: W/"33a64df551425fcc55e4d42a148795d9f25f89d4"',
    'HELLO = base64.b64decode("aGVsbG8gd29ybGQ=")  # "hello world"',
    "token_count = len(tokens)\nmax_tokens: 4096\nprompt_tokens=1532 completion_tokens=211",
    "secret_santa = assign_pairs(people)\nis_secret = False",
    "tokenizer: cl100k_base\nsecretary_name: Alice",
    "password_min_length: 12\ntoken_ttl: 3600\nsecret_name: shop-tls",
    "def login(username: str, password: str) -> Token:\n    return auth.check(username=username, password=password)",
    "Bearer tokens are sent in the Authorization header; see RFC 6750.",
    "Authorization: required for all /admin endpoints",
    "mysql -u root -p shop  # prompts for the password",
    "docker run -p 8080:80 -u 1000:1000 nginx:1.25-alpine",
    "AKIA followed by sixteen characters is an AWS access key id format",
    "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUb3Blbm1lbXN0cmVhbS1leGFtcGxlMAoGCCqGSM49BAMC\n"
    "-----END CERTIFICATE-----",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGx5bGxhYmxlc3NlZHJvb3RzdGVhbWNvbm5lY3Q dev@laptop",
    "primary_key: order_id\nPARTITION_KEY=tenant_id\nsort_key = created_at",
    "Password: see the 1Password vault entry 'shop prod'",
]
