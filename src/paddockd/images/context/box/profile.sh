# Paddock box defaults for login shells.
export PADDOCK=1
[ -d "$HOME/.local/bin" ] && PATH="$HOME/.local/bin:$PATH"
