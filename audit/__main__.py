from audit.cli import app

app(prog_name="audit")
