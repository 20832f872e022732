// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

/// @title TestToken: the sandbox's stablecoins on the local testnet
/// @notice An ordinary ERC-20 with 6 decimals. The testnet puts its runtime
/// code at the catalogue's USDC and EURC addresses in the genesis, with the
/// name, symbol, supply and balances in storage (no constructor runs), so
/// the layout below is a contract with the genesis: name slot 0, symbol
/// slot 1, totalSupply slot 2, balanceOf slot 3, allowance slot 4.
contract TestToken {
    string public name;
    string public symbol;
    uint256 public totalSupply;
    mapping(address => uint256) public balanceOf;
    mapping(address => mapping(address => uint256)) public allowance;

    event Transfer(address indexed from, address indexed to, uint256 value);
    event Approval(address indexed owner, address indexed spender, uint256 value);

    function decimals() external pure returns (uint8) {
        return 6;
    }

    function transfer(address to, uint256 value) external returns (bool) {
        _transfer(msg.sender, to, value);
        return true;
    }

    function approve(address spender, uint256 value) external returns (bool) {
        allowance[msg.sender][spender] = value;
        emit Approval(msg.sender, spender, value);
        return true;
    }

    function transferFrom(address from, address to, uint256 value) external returns (bool) {
        uint256 allowed = allowance[from][msg.sender];
        if (allowed != type(uint256).max) {
            require(allowed >= value, "ERC20: insufficient allowance");
            allowance[from][msg.sender] = allowed - value;
        }
        _transfer(from, to, value);
        return true;
    }

    function _transfer(address from, address to, uint256 value) internal {
        require(to != address(0), "ERC20: transfer to the zero address");
        uint256 held = balanceOf[from];
        require(held >= value, "ERC20: transfer amount exceeds balance");
        balanceOf[from] = held - value;
        balanceOf[to] += value;
        emit Transfer(from, to, value);
    }
}
