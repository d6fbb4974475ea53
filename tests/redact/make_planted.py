#!/usr/bin/env python3
"""Writes planted.txt: realistic command output with one fake secret of every kind spillway's
redactor knows. Deterministic (seeded); every secret is random and matches no real account."""
import base64
import json
import random
import string
import sys

R = random.Random(20240611)
ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"


def pick(chars, n):
    return "".join(R.choice(chars) for _ in range(n))


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def pem(label, nbytes=1190, headers=()):
    body = base64.b64encode(R.randbytes(nbytes)).decode()
    lines = [f"-----BEGIN {label}-----", *headers]
    lines += [body[i:i + 64] for i in range(0, len(body), 64)]
    lines.append(f"-----END {label}-----")
    return lines


hexs = "0123456789abcdef"
aws_id = "AKIA" + pick(string.ascii_uppercase + "234567", 16)
aws_sts_id = "ASIA" + pick(string.ascii_uppercase + "234567", 16)
aws_secret = pick(ALNUM + "+/", 40)
aws_secret2 = pick(ALNUM + "+/", 40)
aws_session = "IQoJb3JpZ2luX2VjE" + pick(ALNUM + "+/", 380)
ghp = "ghp_" + pick(ALNUM, 36)
gh_pat = "github_pat_" + pick(ALNUM, 22) + "_" + pick(ALNUM, 59)
glpat = "glpat-" + pick(URLSAFE, 20)
slack = f"xoxb-{pick(string.digits, 12)}-{pick(string.digits, 13)}-{pick(ALNUM, 24)}"
slack_hook = f"https://hooks.slack.com/services/T{pick(string.ascii_uppercase + string.digits, 8)}/B{pick(string.ascii_uppercase + string.digits, 10)}/{pick(ALNUM, 24)}"
stripe = "sk_live_" + pick(ALNUM, 24)
npm = "npm_" + pick(ALNUM, 36)
pypi = "pypi-AgEIcHlwaS5vcmc" + pick(URLSAFE, 120)
openai = "sk-proj-" + pick(URLSAFE, 20) + "T3BlbkFJ" + pick(URLSAFE, 20)
anthropic = "sk-ant-api03-" + pick(URLSAFE, 93) + "AA"
google = "AIza" + pick(URLSAFE, 35)
gocspx = "GOCSPX-" + pick(URLSAFE, 28)
sendgrid = f"SG.{pick(URLSAFE, 22)}.{pick(URLSAFE, 43)}"
mailchimp = pick(hexs, 32) + "-us12"
twilio_sid = "AC" + pick(hexs, 32)
twilio_key = "SK" + pick(hexs, 32)
discord = b64url(str(R.randrange(10**17, 10**18)).encode()) + "." + pick(URLSAFE, 6) + "." + pick(URLSAFE, 27)
telegram = f"{R.randrange(10**8, 10**9)}:AA{pick(URLSAFE, 33)}"
square_tok = "sq0atp-" + pick(URLSAFE, 22)
square_sec = "sq0csp-" + pick(URLSAFE, 43)
shopify = "shpat_" + pick(hexs, 32)
heroku = "%s-%s-%s-%s-%s" % (pick(hexs, 8), pick(hexs, 4), pick(hexs, 4), pick(hexs, 4), pick(hexs, 12))
digitalocean = "dop_v1_" + pick(hexs, 64)
vault = "hvs." + pick(URLSAFE, 90)
hf = "hf_" + pick(string.ascii_letters, 34)
azure_key = pick(ALNUM + "+/", 86) + "=="
sb_key = pick(ALNUM + "+/", 43) + "="
jwt = ".".join([
    b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode()),
    b64url(json.dumps({"sub": "user-" + pick(string.digits, 6), "iat": 1718000000, "exp": 1718003600}).encode()),
    b64url(R.randbytes(32)),
])
db_pass = "Zq8" + pick(ALNUM, 9)
docker_auth = base64.b64encode(f"deploy:{pick(ALNUM, 20)}".encode()).decode()
gcp_key = "\\n".join(pem("PRIVATE KEY", 1216)) + "\\n"

out = []
w = out.append
w("$ env | sort")
for line in [
    "ANTHROPIC_API_KEY=" + anthropic,
    "AWS_ACCESS_KEY_ID=" + aws_id,
    "AWS_DEFAULT_REGION=eu-west-1",
    "AWS_SECRET_ACCESS_KEY=" + aws_secret,
    "DATABASE_URL=postgres://app:" + db_pass + "@db.internal:5432/app",
    "DIGITALOCEAN_ACCESS_TOKEN=" + digitalocean,
    "DISCORD_BOT_TOKEN=" + discord,
    "GH_PAT=" + gh_pat,
    "GITHUB_TOKEN=" + ghp,
    "GITLAB_TOKEN=" + glpat,
    "GOOGLE_API_KEY=" + google,
    "GOOGLE_OAUTH_CLIENT_SECRET=" + gocspx,
    "HEROKU_API_KEY=" + heroku,
    "HF_TOKEN=" + hf,
    "HOME=/home/dev",
    "LANG=C.UTF-8",
    "MAILCHIMP_API_KEY=" + mailchimp,
    "NPM_TOKEN=" + npm,
    "OPENAI_API_KEY=" + openai,
    "PATH=/home/dev/.cargo/bin:/usr/local/bin:/usr/bin:/bin",
    "PWD=/home/dev/src/app",
    "PYPI_API_TOKEN=" + pypi,
    "SENDGRID_API_KEY=" + sendgrid,
    "SHOPIFY_ACCESS_TOKEN=" + shopify,
    "SLACK_BOT_TOKEN=" + slack,
    "SLACK_WEBHOOK_URL=" + slack_hook,
    "SQUARE_ACCESS_TOKEN=" + square_tok,
    "SQUARE_APPLICATION_SECRET=" + square_sec,
    "STRIPE_SECRET_KEY=" + stripe,
    "TELEGRAM_BOT_TOKEN=" + telegram,
    "TERM=xterm-256color",
    "TWILIO_ACCOUNT_SID=" + twilio_sid,
    "TWILIO_API_KEY=" + twilio_key,
    "USER=dev",
    "VAULT_ADDR=https://vault.internal:8200",
    "VAULT_TOKEN=" + vault,
]:
    w(line)
w("")
w("$ cat .env")
w("# local development settings")
w("DEBUG=true")
w("DB_HOST=localhost")
w("DB_PASSWORD=hunter2")
w('SECRET_KEY="django-insecure-' + pick(ALNUM + "!@#%^&*(-_=+)", 40) + '"')
w("JWT_SECRET='" + pick(ALNUM, 32) + "'")
w("API_KEY=" + pick(ALNUM, 32))
w("CLIENT_SECRET=" + pick(URLSAFE, 40))
w("AUTH_TOKEN=" + pick(hexs, 40))
w("PRIVATE_KEY=0x" + pick(hexs, 64))
w("REDIS_URL=redis://:p4ssw0rd" + pick(ALNUM, 6) + "@localhost:6379/0")
w("")
w("$ kubectl get secret db-credentials -o yaml")
w("apiVersion: v1")
w("data:")
w("  password: " + base64.b64encode(b"correct-horse-" + pick(ALNUM, 8).encode()).decode())
w("  username: " + base64.b64encode(b"app").decode())
w("kind: Secret")
w("metadata:")
w("  creationTimestamp: \"2024-06-11T09:12:44Z\"")
w("  name: db-credentials")
w("  namespace: default")
w("  resourceVersion: \"48122\"")
w("  uid: 3f5e2b8a-6a47-4c1e-9e0b-2f9d1c7a5e44")
w("type: Opaque")
w("")
w("$ docker inspect --format '{{json .Config.Env}}' api | jq .")
w("[")
w('  "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",')
w('  "POSTGRES_PASSWORD=' + pick(ALNUM, 16) + '",')
w('  "STRIPE_KEY=' + "rk_live_" + pick(ALNUM, 24) + '",')
w('  "NODE_ENV=production"')
w("]")
w("")
w("$ cat ~/.docker/config.json")
w("{")
w('  "auths": {')
w('    "registry.example.com": {')
w('      "auth": "' + docker_auth + '"')
w("    }")
w("  }")
w("}")
w("")
w("$ aws configure export-credentials --format process")
w("{")
w('  "Version": 1,')
w('  "AccessKeyId": "' + aws_sts_id + '",')
w('  "SecretAccessKey": "' + aws_secret2 + '",')
w('  "SessionToken": "' + aws_session + '",')
w('  "Expiration": "2024-06-11T10:12:44+00:00"')
w("}")
w("")
w("$ git remote -v")
w("origin\thttps://x-access-token:" + ghp[:4] + pick(ALNUM, 36) + "@github.com/acme/api.git (fetch)")
w("origin\thttps://x-access-token:" + ghp + "@github.com/acme/api.git (push)")
w("mirror\thttps://deploy:" + pick(ALNUM, 14) + "@bitbucket.org/acme/api.git (fetch)")
w("")
w("$ cat ~/.npmrc")
w("//registry.npmjs.org/:_authToken=" + npm[:4] + pick(ALNUM, 36))
w("")
w("$ az storage account show-connection-string -n acmestore")
w('{ "connectionString": "DefaultEndpointsProtocol=https;AccountName=acmestore;AccountKey=' + azure_key + ';EndpointSuffix=core.windows.net" }')
w("Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=" + sb_key)
w("")
w("$ curl -v -H 'Authorization: Bearer " + jwt + "' https://api.example.com/v1/me")
w("> GET /v1/me HTTP/1.1")
w("> Host: api.example.com")
w("> Authorization: Basic " + base64.b64encode(("svc:" + pick(ALNUM, 18)).encode()).decode())
w("< HTTP/1.1 200 OK")
w("")
w("$ cat config/settings.yaml")
w("database:")
w("  host: db.internal")
w("  password: Hunter2" + pick(ALNUM, 6))
w("oauth:")
w("  client_id: acme-web")
w("  client_secret: " + pick(URLSAFE, 32))
w("")
w("$ ps -eo args | grep deploy")
w("deploy --registry registry.example.com --password=" + pick(ALNUM, 18) + " --token " + pick(ALNUM, 30))
w("")
w("$ pytest tests/test_login.py")
w("E       AssertionError: login failed for User(name='alice', password='" + pick(ALNUM, 12) + "')")
w("")
w("$ cat ~/.ssh/id_rsa")
out.extend(pem("RSA PRIVATE KEY"))
w("$ cat ~/.ssh/id_ed25519")
out.extend(pem("OPENSSH PRIVATE KEY", 300))
w("$ cat tls/server.key")
out.extend(pem("EC PRIVATE KEY", 110))
w("$ cat legacy.key")
out.extend(pem("RSA PRIVATE KEY", 600, ("Proc-Type: 4,ENCRYPTED", "DEK-Info: AES-128-CBC," + pick("0123456789ABCDEF", 32), "")))
w("$ gpg --export-secret-keys --armor dev@example.com")
out.extend(pem("PGP PRIVATE KEY BLOCK", 500, ("Version: GnuPG v2", "")))
w("")
w("$ cat service-account.json")
w("{")
w('  "type": "service_account",')
w('  "project_id": "acme-prod",')
w('  "private_key_id": "' + pick(hexs, 40) + '",')
w('  "private_key": "' + gcp_key + '",')
w('  "client_email": "deployer@acme-prod.iam.gserviceaccount.com",')
w('  "auth_uri": "https://accounts.google.com/o/oauth2/auth",')
w('  "token_uri": "https://oauth2.googleapis.com/token"')
w("}")
w("")
w("$ tail -1 /var/log/app.log")
w("2024-06-11T09:12:44Z INFO refreshed session token=" + jwt.split(".")[0] + "." + b64url(json.dumps({"sub": "svc"}).encode()) + "." + b64url(R.randbytes(32)))
w("2024-06-11T09:12:45Z INFO google token ya29." + pick(URLSAFE, 60))

sys.stdout.write("\n".join(out) + "\n")
