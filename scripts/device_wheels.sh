# Sourced by the device scripts: install_wheels CHECK puts .whl/'s wheels into $SITE, gives the
# checkout the dist-info it lacks, and runs the Python CHECK against them.

install_wheels() {
    # once a call: device_all.sh runs several checks, each of which installs them
    if [[ ! -e $SITE/.installed ]]; then
        $PYTHON -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target "$SITE" .whl/*.whl
        touch "$SITE/.installed"
    fi
    # the server asks for its own version at start-up: the checkout has no dist-info of its own
    local version
    version=$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml | head -1)
    mkdir -p "$SITE/modelhost-$version.dist-info"
    printf 'Metadata-Version: 2.1\nName: modelhost\nVersion: %s\n' "$version" \
        >"$SITE/modelhost-$version.dist-info/METADATA"
    export PYTHONPATH=$SITE:$PWD
    $PYTHON -c "$1"
}
